-- The idempotency-key ledger of executors: one outcome per key, insert-if-absent.
CREATE TABLE idempotency_keys (
    key         text PRIMARY KEY,
    outcome     text NOT NULL,
    created_at  integer NOT NULL
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
