package client

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// defaultSignedPrekeyGrace is Config.SignedPrekeyGrace when unset.
const defaultSignedPrekeyGrace = 14 * 24 * time.Hour

// RotateSignedPrekey replaces the device's signed prekey with a new one,
// stores it and publishes the new bundle. Initiations naming the replaced
// signed prekey are still answered for Config.SignedPrekeyGrace, then
// refused with session.ErrUnknownPrekey; retired prekeys whose grace
// period is over are dropped. The application calls it on its schedule
// (for example weekly). Returns ErrNotInitialized before Initialize, the
// store's error (nothing changed), or, after the new prekey is stored, the
// directory's error for the publication, wrapped with
// ErrBundleNotPublished: PublishBundle, or the next rotation or
// replenishment, publishes again.
func (c *Client) RotateSignedPrekey(ctx context.Context) error {
	return c.changePrekeys(ctx, "rotate signed prekey", func(id *session.Identity, pk *session.Prekeys, _ store.DeviceAddress) (prekeyChange, error) {
		return republish, pk.Rotate(rand.Reader, id, c.cfg.Now(), c.cfg.SignedPrekeyGrace)
	})
}

// ReplenishPrekeys asks the directory how many one-time prekeys it still
// holds for this device and, below Config.OneTimePrekeyThreshold, adds as
// many as brings it back to Config.OneTimePrekeys, stores them and
// publishes the bundle; it returns how many it added (0: none added,
// nothing published). Anyone can drain one-time prekeys by fetching
// bundles; the application calls this on its schedule. It also drops
// retired signed prekeys whose grace period is over. It asks for the
// count under the send mutex, so that replenishments running at the same
// time add keys once, each counting what the one before it published.
// Returns ErrNotInitialized before Initialize, the directory's error for
// the count (ErrDirectoryAnswer for a negative one), the store's error
// (nothing changed), or, after the new prekeys are stored, the
// directory's error for the publication, wrapped with
// ErrBundleNotPublished (PublishBundle publishes again).
func (c *Client) ReplenishPrekeys(ctx context.Context) (int, error) {
	added := 0
	err := c.changePrekeys(ctx, "replenish prekeys", func(_ *session.Identity, pk *session.Prekeys, self store.DeviceAddress) (prekeyChange, error) {
		// Asked under the send mutex: a replenishment that ran while the
		// count was asked for would otherwise be added to again.
		left, err := c.cfg.Directory.OneTimePrekeyCount(ctx, self)
		if err != nil {
			return unchanged, err
		}
		if left < 0 {
			// Untrusted: taken as is it would generate and store up to
			// MaxOneTimePrekeys keys, dropping the held ones.
			return unchanged, fmt.Errorf("%w: %d one-time prekeys left", ErrDirectoryAnswer, left)
		}
		expired := pk.Expire(c.cfg.Now())
		if left >= c.cfg.OneTimePrekeyThreshold {
			if expired { // the bundle shows no retired key: nothing to publish
				return storeOnly, nil
			}
			return unchanged, nil
		}
		keys, err := pk.Replenish(rand.Reader, c.cfg.OneTimePrekeys-left)
		added = len(keys)
		return republish, err
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// prekeyChange is what a change of the prekeys made necessary.
type prekeyChange int

const (
	unchanged prekeyChange = iota // nothing to store
	storeOnly                     // stored; the bundle is the same
	republish                     // stored and the bundle published
)

// changePrekeys applies change to a copy of the prekeys under the send
// mutex (Receive answers initiations with the prekeys under it too),
// stores the result and only then keeps it, and publishes the bundle if
// change says the bundle changed (the one-time prekeys or the signed
// prekey).
func (c *Client) changePrekeys(ctx context.Context, what string, change func(*session.Identity, *session.Prekeys, store.DeviceAddress) (prekeyChange, error)) error {
	if err := c.lockSend(); err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	defer c.sendMu.Unlock()
	if err := c.syncPrekeys(ctx); err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	identity, prekeys, self, err := c.local()
	if err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	pk, err := clonePrekeys(prekeys)
	if err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	changed, err := change(identity, pk, self)
	if err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	if changed == unchanged {
		return nil
	}
	secret, err := encodeLocal(identity, pk)
	if err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	if err := c.st.SaveLocalIdentity(ctx, store.LocalIdentity{Address: self, Secret: secret}); err != nil {
		c.prekeysUnsure = true // the write may have reached the disk
		return fmt.Errorf("client: %s: %w", what, err)
	}
	c.mu.Lock()
	c.prekeys = pk
	c.mu.Unlock()
	if changed != republish {
		return nil
	}
	return c.publish(ctx, what)
}

func clonePrekeys(p *session.Prekeys) (*session.Prekeys, error) {
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return session.UnmarshalPrekeys(b)
}
