// Side-effect CSS imports are bundled by vite.
declare module '*.css';
