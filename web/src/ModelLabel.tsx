/**
 * The model that gave the latest answer (from its message metadata); nothing
 * before the first answer. A model whose name says it is offline (the test
 * model) gets a visible "offline" hint.
 */
export function ModelLabel({ model }: { model: string | null }) {
  if (!model) return null;
  const offline = /offline/i.test(model);
  return (
    <span className="model" data-testid="model-label" title="Model of the latest answer">
      <span className="model-name">{model}</span>
      {offline && (
        <span className="model-offline" title="No language model answered: the server runs its offline test model">
          offline
        </span>
      )}
    </span>
  );
}
