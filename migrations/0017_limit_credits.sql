-- Credits: room a claim set aside on a limit for the next claims, so that claimers stop taking
-- turns on the limit's one row (issue 18). Every claim through a limit used to lock its row until
-- its commit, WAL flush included, so two workers' claims through one limit ran one after the other
-- even when the limit was nowhere near binding.
--
-- A claim that locks a limit with plenty of room (at least 2 × 8 lanes × 4 sub-windows × its
-- batch, after what it takes) also moves a share of that room (slots, tokens, or both) into credit
-- rows of its lane (pg_backend_pid() % 8): one for its 50 ms sub-window (`grain`, the window's unit,
-- migration 0016) and one for each of the next three. The limit counts the shares as spent at once:
-- slots in `in_use`, tokens out of the bucket and into the window, each at its own sub-window (so a
-- later sub-window's share counts from now on in every window that meets it). A later claim whose
-- every limit has a credit row of its sub-window with enough for its candidates takes from those
-- rows instead, locked with SKIP LOCKED, and never touches the limit rows; any other claim locks
-- the limits as before.
--
-- So no limit ever lets more through than before: a credit is room taken from the limit under its
-- lock, and a start that a credit paid for happens in the sub-window the limit counted it in.
-- A credit records the limit's figures it was granted under; once the limit's cap, rate or burst
-- changes (or its job switches to `skip`), no claim takes from it. Credits of an earlier sub-window
-- are dead: the next claim that locks the limit deletes them (those not locked at that moment) and
-- gives back what they still hold: slots to `in_use`, tokens to the bucket (up to its burst) and out
-- of the window at their sub-window, so the limit counts exactly the runs that started. A credit's
-- slots are not held by any run: `limit_states` shows `in_use` without them.
CREATE TABLE limit_credits (
  limit_id bigint   NOT NULL,
  lane     smallint NOT NULL,
  grain    bigint   NOT NULL,
  slots    integer  NOT NULL CHECK (slots >= 0),
  tokens   integer  NOT NULL CHECK (tokens >= 0),
  -- The limit's figures when granted: a claim takes from the credit only while they still hold.
  max_concurrency integer,
  rate     double precision,
  burst    integer,
  PRIMARY KEY (limit_id, lane, grain)
) WITH (fillfactor = 50);

-- Limits as they stand: `in_use` less the releases not folded yet (migration 0015) and less the
-- slots credits set aside, which no run holds; `credited_tokens`, the tokens credits hold (the
-- bucket refills only up to its burst less these).
CREATE OR REPLACE VIEW limit_states AS
SELECT l.tenant_id, l.key, l.gate, l.rate, l.burst, l.tokens, l.refilled_at, l.max_concurrency,
  l.in_use - GREATEST(0, COALESCE((SELECT sum(r.released) FROM limit_releases r WHERE r.limit_id = l.id), 0)
    - l.released)::integer
    - COALESCE((SELECT sum(c.slots) FROM limit_credits c WHERE c.limit_id = l.id), 0)::integer AS in_use,
  l.overlap, l.busy_from, l.freed_at, l.created_at, l.updated_at, l.id, l.recent_at, l.recent_n,
  COALESCE((SELECT sum(c.tokens) FROM limit_credits c WHERE c.limit_id = l.id), 0)::double precision AS credited_tokens
FROM limits l;
