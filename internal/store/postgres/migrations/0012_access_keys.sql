-- 0012_access_keys adds the access keys of the AWS protocols, as the
-- sqlite driver's 0012_access_keys does. Verifying a SigV4 signature
-- needs the secret itself, so it is stored sealed: AES-256-GCM under a
-- key the server keeps outside the database (its --secrets-key-file),
-- bound to the access key id. secret_key_id names that key, so that a
-- server given another says so. A key's team is its user's.
CREATE TABLE access_keys (
    id                text COLLATE "C" PRIMARY KEY,
    access_key_id     text COLLATE "C" NOT NULL UNIQUE,
    user_id           text COLLATE "C" NOT NULL REFERENCES users (id),
    created_at        timestamptz NOT NULL,
    revoked_at        timestamptz,
    secret_key_id     text NOT NULL,
    secret_nonce      bytea NOT NULL,
    secret_ciphertext bytea NOT NULL
);
CREATE INDEX access_keys_by_user ON access_keys (user_id, created_at, id);
