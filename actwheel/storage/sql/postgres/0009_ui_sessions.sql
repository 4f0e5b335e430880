-- The dashboard's sign-in sessions (issue 13): an API key presented once on the sign-in form is
-- exchanged for a random session id kept in an HttpOnly cookie; only sha256 of that id is stored,
-- with the key it was made from, the principal and the owner, valid until expires_at (the
-- service's clock decides: instants are passed in). Sign-out sets revoked_at. Any instance may
-- serve a signed-in browser, hence a table.
CREATE TABLE ui_sessions (
    id            text PRIMARY KEY,
    session_hash  text NOT NULL UNIQUE,
    key_id        text NOT NULL,
    owner_id      text NOT NULL,
    principal_id  text NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    revoked_at    timestamptz
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);
