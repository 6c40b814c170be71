-- The model a call asked for and the model that served it.
--
-- `usage_facts.model` is the configured name a run asked for (what an operator
-- groups and prices by); `usage_facts.response_model` the name the provider
-- reported when it is another one (a dated snapshot behind an alias, a
-- gateway's deployment behind a route name). Rows written before it carry the
-- provider's name in `model` and none here.

ALTER TABLE usage_facts ADD COLUMN response_model TEXT;
