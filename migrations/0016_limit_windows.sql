-- Pacing of a limit with a rate (issue 18): besides its token bucket, a limit lets at most
-- max(burst, ceil(rate)) runs start in any one-second window of the claims' instants. A bucket
-- alone lets any span of d seconds take burst + rate × d, so a second that follows a slow one could
-- start up to twice the rate.
--
-- The window is counted on the limit's own row (the claim locks that row, and in READ COMMITTED
-- only a locked row is re-read at its latest version; another table would be read at the
-- statement's snapshot and could let too many through), in sub-windows of 50 ms: `recent_at` holds
-- sub-window indexes (floor(epoch ms / 50)) and `recent_n`, in parallel, the runs started in each.
-- An entry counts while its sub-window meets the last second (index ≥ the current one − 20), so
-- there are at most 21; the claim adds its starts to the current entry and drops the dead ones in
-- the update that spends the tokens. NULL (or empty): nothing started recently.
ALTER TABLE limits
  ADD COLUMN recent_at bigint[],
  ADD COLUMN recent_n integer[],
  ADD CONSTRAINT limits_recent_check CHECK (cardinality(recent_at) IS NOT DISTINCT FROM cardinality(recent_n));

-- Limits as they stand (migration 0015) show the window too.
CREATE OR REPLACE VIEW limit_states AS
SELECT l.tenant_id, l.key, l.gate, l.rate, l.burst, l.tokens, l.refilled_at, l.max_concurrency,
  l.in_use - GREATEST(0, COALESCE((SELECT sum(r.released) FROM limit_releases r WHERE r.limit_id = l.id), 0)
    - l.released)::integer AS in_use,
  l.overlap, l.busy_from, l.freed_at, l.created_at, l.updated_at, l.id, l.recent_at, l.recent_n
FROM limits l;
