-- The MCP server's run-now confirmations (issue 12): a single-use token per confirmation, stored as
-- sha256 only, bound to the owner, the key, the automation and its version, valid until expires_at
-- (the service's clock decides: instants are passed in, never now()). Any instance may redeem one,
-- hence a table.
CREATE TABLE mcp_confirmations (
    id                  text PRIMARY KEY,
    token_hash          text NOT NULL UNIQUE,
    owner_id            text NOT NULL,
    key_id              text NOT NULL,
    automation_id       text NOT NULL,
    automation_version  bigint NOT NULL,
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL,
    used_at             timestamptz,
    run_id              text
);
CREATE INDEX mcp_confirmations_expires ON mcp_confirmations (expires_at);

-- The server keys of the MCP face (the preview digests' HMAC key): random, made once, the same on
-- every instance of one database.
CREATE TABLE mcp_server_keys (
    name        text PRIMARY KEY,
    secret      bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
