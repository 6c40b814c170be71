import { usePage } from './page-context';

/**
 * Which graph runs the chat. A new chat (no messages yet) shows a picker of the
 * graphs this account may use, at the server's default (disabled when there is
 * only one, so it still says which runs); a chat with messages shows its graph,
 * read-only. Nothing when the server does not list graphs. The graphs and the
 * one picked for the new chat are the page's (`usePage`).
 */
export function GraphPicker({
  locked,
}: {
  /** The chat's graph once it has messages (undefined: not known). */
  locked: string | null | undefined;
}) {
  const { graphs, pickedGraph, onPickGraph } = usePage();
  if (locked !== null) {
    if (!locked) return null;
    const description = graphs.status === 'ready' ? graphs.graphs.find((g) => g.name === locked)?.description : undefined;
    return (
      <div className="graph-bar">
        <span className="graph-bar-label">Graph</span>
        <span className="graph-label" data-testid="graph-label" title={description || undefined}>
          {locked}
        </span>
      </div>
    );
  }
  if (graphs.status !== 'ready') return null;
  const current = graphs.graphs.find((g) => g.name === pickedGraph) ?? graphs.graphs[0];
  return (
    <div className="graph-bar">
      <label className="graph-bar-label" htmlFor="graph-picker">
        Graph
      </label>
      <select
        id="graph-picker"
        data-testid="graph-picker"
        value={current?.name}
        disabled={graphs.graphs.length < 2}
        aria-describedby={current?.description ? 'graph-description' : undefined}
        onChange={(e) => onPickGraph(e.target.value)}
      >
        {graphs.graphs.map((g) => (
          <option key={g.name} value={g.name}>
            {g.name}
            {g.name === graphs.defaultGraph ? ' (default)' : ''}
          </option>
        ))}
      </select>
      {current?.description && (
        <span id="graph-description" className="graph-description">
          {current.description}
        </span>
      )}
    </div>
  );
}
