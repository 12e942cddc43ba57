package service

import (
	"context"
	"errors"
	"fmt"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Webhooks' signing secrets at rest. Signing a delivery needs the secret
// itself, so, like an access key's, it is sealed under the server's
// secrets key (Config.SecretsKey), bound to the webhook's id so that a
// sealed secret copied to another webhook does not open there, and opened
// when a delivery is signed.
//
// Secrets stored in clear (by a version before sealing, or by a server
// without a secrets key) are sealed at the next start of a server with a
// key (sealWebhookSecrets); until then, and on a server without a key,
// a clear secret signs as it did. A server without a key stores new
// secrets in clear: serve always has one; only tests go without.

// sealWebhookSecret returns w as it is to be stored: its secret sealed and
// the clear one dropped, or as is on a server without a secrets key.
func (s *Service) sealWebhookSecret(w core.Webhook) core.Webhook {
	if s.secretsKey == nil {
		return w
	}
	w.Sealed = s.secretsKey.Seal([]byte(w.Secret), []byte(w.ID))
	w.Secret = ""
	return w
}

// webhookSecret returns the key that signs hook's deliveries: its sealed
// secret opened, or its clear secret when it has none. The error says why
// a sealed secret does not open, and never holds the secret.
func (s *Service) webhookSecret(hook core.Webhook) ([]byte, error) {
	if hook.Sealed.KeyID == "" {
		return []byte(hook.Secret), nil
	}
	if s.secretsKey == nil {
		return nil, errors.New("the webhook's secret is sealed and this server holds no secrets key to open it (serve --secrets-key-file)")
	}
	secret, err := s.secretsKey.Open(hook.Sealed, []byte(hook.ID))
	if err != nil {
		return nil, fmt.Errorf("the webhook's secret does not open: %w", err)
	}
	return secret, nil
}

// sealWebhookSecrets seals, at start, the webhooks' secrets still stored
// in clear, and warns of those sealed under another key than this
// server's, whose deliveries will fail until it is given that key. A
// secret that another replica seals meanwhile is left to it.
func (s *Service) sealWebhookSecrets(ctx context.Context) error {
	if s.secretsKey == nil {
		return nil
	}
	hooks, err := s.store.ListWebhooks(ctx, "")
	if err != nil {
		return fmt.Errorf("listing webhooks: %w", err)
	}
	sealed, others := 0, map[string]int{}
	for _, w := range hooks {
		if w.Sealed.KeyID != "" {
			if w.Sealed.KeyID != s.secretsKey.ID() {
				others[w.Sealed.KeyID]++
			}
			continue
		}
		err := s.store.SealWebhookSecret(ctx, w.ID, w.Secret, s.sealWebhookSecret(w).Sealed)
		switch {
		case errors.Is(err, store.ErrConflict):
		case err != nil:
			return fmt.Errorf("sealing the secret of webhook %s: %w", w.ID, err)
		default:
			sealed++
		}
	}
	if sealed > 0 {
		s.log.Info("sealed the signing secrets of webhooks stored in clear under the secrets key", "webhooks", sealed, "key", s.secretsKey.ID())
	}
	for id, n := range others {
		s.log.Warn("webhooks' signing secrets were sealed under another secrets key than this server's; their deliveries will fail: give this server the key file of the others",
			"webhooks", n, "sealedUnder", id, "serverKey", s.secretsKey.ID())
	}
	return nil
}
