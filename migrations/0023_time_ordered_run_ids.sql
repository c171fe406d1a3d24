-- Run ids ordered by their creation (UUID version 7: 48 bits of Unix milliseconds, then the version,
-- then 74 random bits), not random (version 4). Each new run's key went to a random leaf page of
-- runs_pkey: at 10,000,000 runs a tick's 1,000 inserts dirtied about 1,000 leaf pages that were not
-- in shared buffers (the tick took 1.53 times as long as on an empty database; bench/scenarios/
-- history.mjs, docs/benchmarks.md). Now they land on the index's rightmost pages, as the runs a
-- claim or a completion looks up soon after do. The 74 random bits keep ids as hard to guess as
-- they need to be (every read is filtered by tenant anyway); ids already stored keep their values.
-- PostgreSQL 15 has no uuidv7(): the expression takes a random (v4) uuid, writes the milliseconds
-- into its first 6 bytes, and turns its version nibble from 0100 to 0111 (bits 52 and 53 of the
-- bytea, counted from the low bit of each byte); its variant bits are v4's, as v7 wants.
ALTER TABLE runs ALTER COLUMN run_id SET DEFAULT encode(
  set_bit(set_bit(
    overlay(uuid_send(gen_random_uuid())
      PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
      FROM 1 FOR 6),
    52, 1), 53, 1),
  'hex')::uuid;
