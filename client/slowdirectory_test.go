package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

// holdingDirectory is a directory whose Publish, once armed, signals on
// entered and waits for release: a directory that answers slowly.
type holdingDirectory struct {
	transport.Directory
	entered, release chan struct{}
}

func (d *holdingDirectory) Publish(ctx context.Context, b session.Bundle) error {
	if d.entered != nil {
		close(d.entered)
		d.entered = nil
		<-d.release
	}
	return d.Directory.Publish(ctx, b)
}

// TestSlowPublishBlocksNoLocalCall: while PublishBundle publishes the
// bundle on a directory that answers slowly, the calls that make no
// network call and do not take the send mutex (Address, pages, counts)
// still answer at once: no lock they need is held across the publication.
func TestSlowPublishBlocksNoLocalCall(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	dir := &holdingDirectory{Directory: net}
	c, err := client.Open(ctx, client.Config{Store: memstore.New(newKeyring(t)), Transport: net, Directory: dir})
	require.NoError(t, err)
	require.NoError(t, c.Initialize(ctx, alice))

	dir.entered, dir.release = make(chan struct{}), make(chan struct{})
	entered := dir.entered
	initDone := make(chan error, 1)
	go func() { initDone <- c.PublishBundle(ctx) }()
	<-entered

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Address", func() error { _, err := c.Address(); return err }},
		{"PendingMessageCount", func() error { _, err := c.PendingMessageCount(ctx, nil); return err }},
		{"PendingMessages", func() error {
			_, err := c.PendingMessages(ctx, store.PageRequest{Limit: 1})
			return err
		}},
	} {
		done := make(chan error, 1)
		go func() { done <- tc.call() }()
		select {
		case err := <-done:
			require.NoError(t, err, tc.name)
		case <-time.After(2 * time.Second):
			close(dir.release)
			<-done
			t.Fatalf("%s waited for the directory's publication", tc.name)
		}
	}
	close(dir.release)
	require.NoError(t, <-initDone)
}

// barrierDirectory answers OneTimePrekeyCount only once two callers asked
// (or 300ms passed): two replenishments that read the count at once.
type barrierDirectory struct {
	transport.Directory
	mu      sync.Mutex
	waiting int
	both    chan struct{}
}

func (d *barrierDirectory) OneTimePrekeyCount(ctx context.Context, addr store.DeviceAddress) (int, error) {
	d.mu.Lock()
	d.waiting++
	if d.waiting == 2 {
		close(d.both)
	}
	d.mu.Unlock()
	select {
	case <-d.both:
	case <-time.After(300 * time.Millisecond):
	}
	return d.Directory.OneTimePrekeyCount(ctx, addr)
}

// TestConcurrentReplenishAddsOnce: two ReplenishPrekeys at once bring the
// directory's one-time prekeys back to Config.OneTimePrekeys, not beyond:
// the second one sees what the first one added.
func TestConcurrentReplenishAddsOnce(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	dir := &barrierDirectory{Directory: net, both: make(chan struct{})}
	const keys = 8
	c, err := client.Open(ctx, client.Config{Store: memstore.New(newKeyring(t)), Transport: net, Directory: dir, OneTimePrekeys: keys})
	require.NoError(t, err)
	require.NoError(t, c.Initialize(ctx, alice))
	for range keys - 1 { // one left, below the threshold
		_, err := net.Fetch(ctx, alice)
		require.NoError(t, err)
	}

	var wg sync.WaitGroup
	added := make([]int, 2)
	for i := range added {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := c.ReplenishPrekeys(ctx)
			assert.NoError(t, err)
			added[i] = n
		}()
	}
	wg.Wait()
	require.Equal(t, keys-1, added[0]+added[1], "added %v", added)
	left, err := net.OneTimePrekeyCount(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, keys, left)
}
