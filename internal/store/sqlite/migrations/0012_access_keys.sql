-- 0012_access_keys adds the access keys of the AWS protocols. Verifying a
-- SigV4 signature needs the secret itself, so it is stored sealed:
-- AES-256-GCM under a key the server keeps outside the database (its
-- --secrets-key-file), bound to the access key id. secret_key_id names
-- that key, so that a server given another says so. A key's team is its
-- user's.
CREATE TABLE access_keys (
    id                TEXT PRIMARY KEY,
    access_key_id     TEXT NOT NULL UNIQUE,
    user              TEXT NOT NULL REFERENCES users (id),
    created_at        INTEGER NOT NULL,
    revoked_at        INTEGER,
    secret_key_id     TEXT NOT NULL,
    secret_nonce      BLOB NOT NULL,
    secret_ciphertext BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX access_keys_by_user ON access_keys (user, created_at, id);
