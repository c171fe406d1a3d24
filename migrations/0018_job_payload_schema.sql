-- A job's payload schema (issue 19): a JSON Schema every payload of the job must match, stored
-- with the definition so that every server checks a trigger against the same schema, whichever
-- process defined the job (`defineJob` in code, `PUT /v1/jobs/{id}`, a jobs file). NULL: any
-- payload, as before. Validated before it is written (core/payload-schema.ts: at most 16 KiB, a
-- schema ajv compiles, the job's own payload matching it); the database only keeps it.
ALTER TABLE jobs ADD COLUMN payload_schema jsonb;
