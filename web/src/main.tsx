import './zod-config';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { adoptToken } from './auth';
import './styles.css';

// This script also runs as the formatting worker (offload.ts), which has no
// document: there, nothing here runs.
if (typeof document !== 'undefined') {
  // Before anything renders or fetches: the token leaves the address bar.
  adoptToken();

  const root = document.getElementById('root');
  if (root) {
    createRoot(root).render(
      <StrictMode>
        <App />
      </StrictMode>,
    );
  }
}
