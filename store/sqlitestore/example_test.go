package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

// Open a store on a file, the way an application does on every start: the
// first Open creates and migrates the file, later ones reopen it. The
// storage key comes from the platform's keystore in an application; here
// it is generated. While a store holds the file, a second Open of it is
// refused; what was pending is there again after a reopen.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "client.db")
	key, err := seal.GenerateKey()
	if err != nil {
		panic(err)
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		panic(err)
	}

	// bob publishes his bundle on the in-process network.
	net := transporttest.NewNetwork()
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	bobClient, err := client.Open(ctx, client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
	if err != nil {
		panic(err)
	}
	defer bobClient.Close()
	if err := bobClient.Initialize(ctx, bob); err != nil {
		panic(err)
	}

	s, err := sqlitestore.Open(ctx, path, keys)
	if err != nil {
		panic(err)
	}
	c, err := client.Open(ctx, client.Config{Store: s, Transport: net, Directory: net})
	if err != nil {
		panic(err)
	}
	if err := c.Initialize(ctx, store.DeviceAddress{UserID: "alice", DeviceID: 1}); err != nil {
		panic(err)
	}
	if _, err := c.Send(ctx, bob, []byte("hello")); err != nil {
		panic(err)
	}
	_, err = sqlitestore.Open(ctx, path, keys)
	fmt.Println("second open in use:", errors.Is(err, store.ErrInUse))
	c.Close()
	if err := s.Close(); err != nil {
		panic(err)
	}

	// The next start: the same file, the same key.
	s, err = sqlitestore.Open(ctx, path, keys)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	c, err = client.Open(ctx, client.Config{Store: s, Transport: net, Directory: net})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	n, err := c.PendingMessageCount(ctx, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("pending after reopen:", n)
	// Output:
	// second open in use: true
	// pending after reopen: 1
}
