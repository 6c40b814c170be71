import type { Decision, ToolInfo } from './types';
import { DECISION_LABEL, EFFECT_HINT, EFFECT_LABEL, splitToolId } from './format';
import { printable } from './printable';

export type ToolsState =
  | { status: 'loading' }
  | { status: 'error'; message: string }
  | { status: 'unauthorized'; message: string }
  | { status: 'ready'; tools: ToolInfo[] };

const GROUPS: { decision: Decision; title: string; hint: string }[] = [
  { decision: 'approval', title: 'Needs your approval', hint: 'The agent pauses and asks before each call.' },
  { decision: 'allow', title: 'Runs automatically', hint: 'The agent may call these without asking.' },
  { decision: 'deny', title: 'Blocked', hint: 'Listed for reference; calls are refused.' },
];

/** The tools (of the graph in effect, when named) grouped by policy decision; a sheet on narrow screens. */
export function ToolsPanel({
  state,
  graph,
  open,
  onClose,
  onRetry,
}: {
  state: ToolsState;
  /** The graph whose tools these are. */
  graph?: string | undefined;
  open: boolean;
  onClose: () => void;
  onRetry: () => void;
}) {
  return (
    <aside
      id="tools-panel"
      className={`tools-panel${open ? ' open' : ''}`}
      data-testid="tools-panel"
      aria-labelledby="tools-panel-title"
      tabIndex={0}
      onKeyDown={(e) => {
        if (e.key === 'Escape') onClose();
      }}
    >
      <div className="tools-panel-head">
        <h2 id="tools-panel-title">
          Tools &amp; policy
          {graph && <span className="tools-graph"> · graph {graph}</span>}
        </h2>
        <button type="button" className="btn btn-ghost btn-icon tools-close" onClick={onClose} aria-label="Close tools panel">
          ×
        </button>
      </div>
      {state.status === 'loading' && <p className="muted">Loading tools…</p>}
      {state.status === 'unauthorized' && <p className="muted">The tool list needs the server's token.</p>}
      {state.status === 'error' && (
        <div className="tools-error">
          <p>Could not load the tool list: {state.message}</p>
          <button type="button" className="btn btn-small" onClick={onRetry}>
            Try again
          </button>
        </div>
      )}
      {state.status === 'ready' && state.tools.length === 0 && (
        <p className="muted">No tools are offered: the agent can only answer in text.</p>
      )}
      {state.status === 'ready' &&
        GROUPS.map(({ decision, title, hint }) => {
          const tools = state.tools.filter((t) => t.decision === decision);
          if (tools.length === 0) return null;
          return (
            <section key={decision} className={`tools-group decision-${decision}`} aria-label={title}>
              <h3>
                {title} <span className="count">{tools.length}</span>
              </h3>
              <p className="muted small">{hint}</p>
              <ul>
                {tools.map((t) => {
                  const { ns, name } = splitToolId(t.id);
                  return (
                    <li key={t.id} data-tool={t.id} data-decision={t.decision} data-effect={t.effect}>
                      <div className="tool-row">
                        <span className="tool-row-name" title={t.id}>
                          <span className="tool-ns">{ns}</span>
                          {name}
                        </span>
                        <span className={`badge effect-${t.effect}`} title={EFFECT_HINT[t.effect]}>
                          {EFFECT_LABEL[t.effect]}
                        </span>
                      </div>
                      {t.description && <p className="tool-desc">{printable(t.description)}</p>}
                      <span className="sr-only">{DECISION_LABEL[t.decision]}</span>
                    </li>
                  );
                })}
              </ul>
            </section>
          );
        })}
    </aside>
  );
}
