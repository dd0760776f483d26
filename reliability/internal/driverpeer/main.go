// Command driverpeer is the other SQLite driver's process in the
// cross-driver tests (reliability/crossdriver_test.go): the test builds it
// with the other CGO_ENABLED than its own, so that one file meets both
// drivers, mattn/go-sqlite3 and modernc.org/sqlite, one process each.
//
// Usage: driverpeer -db FILE -key HEX [-newkey HEX] OP [ARGS]
//
//	driver          print the import path of the SQLite driver it links
//	dump            open the store (sealing a legacy plaintext queue) and
//	                print every pending message, one line each:
//	                "<sequence> <user> <device> <id> <plaintext hex>",
//	                then "count <n>" (the store's count)
//	insert N PREFIX open the store, store N pending messages to carol/3
//	                whose plaintexts are PREFIX-0 .. PREFIX-(N-1), then dump
//	rotate          open the store with -key and rotate it to -newkey
//	hold            open the store, print "held", and keep it open until
//	                standard input ends
//	try             open the store: print "inuse" and exit 0 if it is
//	                refused with store.ErrInUse, else exit 1
//
// Exit codes: 0 done, 1 the operation failed, 2 usage.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

func main() {
	path := flag.String("db", "", "the database file")
	key := flag.String("key", "", "the storage key's secret, hex")
	newKey := flag.String("newkey", "", "rotate: the new key's secret, hex")
	flag.Parse()
	if flag.NArg() == 0 {
		usage("no operation")
	}
	if flag.Arg(0) == "driver" {
		fmt.Println(sqlitedriver.Package)
		return
	}
	if *path == "" || *key == "" {
		usage("-db and -key are needed")
	}
	ctx := context.Background()
	k := parseKey(*key)
	keys, err := seal.NewKeyring(k)
	if err != nil {
		fail(err)
	}
	s, err := sqlitestore.Open(ctx, *path, keys, sqlitestore.WithLegacyUpgrade())
	if flag.Arg(0) == "try" {
		if errors.Is(err, store.ErrInUse) {
			fmt.Println("inuse")
			return
		}
		if err == nil {
			s.Close()
		}
		fmt.Fprintf(os.Stderr, "driverpeer: try: opened (error %v)\n", err)
		os.Exit(1)
	}
	if err != nil {
		fail(err)
	}
	switch flag.Arg(0) {
	case "dump":
	case "insert":
		if flag.NArg() != 3 {
			usage("insert N PREFIX")
		}
		n, err := strconv.Atoi(flag.Arg(1))
		if err != nil {
			usage("insert N PREFIX")
		}
		to := store.DeviceAddress{UserID: "carol", DeviceID: 3}
		for i := range n {
			if _, err := s.InsertPending(ctx, to, store.NewLogicalMessageID(), fmt.Appendf(nil, "%s-%d", flag.Arg(2), i)); err != nil {
				fail(err)
			}
		}
	case "rotate":
		if *newKey == "" {
			usage("rotate needs -newkey")
		}
		if err := s.RotateKey(ctx, parseKey(*newKey), 0, nil); err != nil {
			fail(err)
		}
		if err := s.Close(); err != nil {
			fail(err)
		}
		return
	case "hold":
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := s.Close(); err != nil {
			fail(err)
		}
		return
	default:
		usage("unknown operation " + flag.Arg(0))
	}
	if err := dump(ctx, s); err != nil {
		fail(err)
	}
	if err := s.Close(); err != nil {
		fail(err)
	}
}

// dump prints every pending message of s and its count.
func dump(ctx context.Context, s *sqlitestore.Store) error {
	var after *int64
	for {
		page, err := s.PendingMessages(ctx, store.PageRequest{After: after, Limit: store.MaxPageSize})
		if err != nil {
			return err
		}
		for _, m := range page.Messages {
			fmt.Printf("%d %s %d %s %x\n", m.Sequence, m.Recipient.UserID, m.Recipient.DeviceID, m.ID, m.Plaintext)
		}
		if page.NextAfterSequence == nil {
			break
		}
		after = page.NextAfterSequence
	}
	n, err := s.PendingMessageCount(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("count %d\n", n)
	return nil
}

func parseKey(h string) seal.Key {
	b, err := hex.DecodeString(h)
	if err != nil {
		usage("a key is hex")
	}
	k, err := seal.NewKey(b)
	if err != nil {
		fail(err)
	}
	return k
}

func usage(why string) {
	fmt.Fprintln(os.Stderr, "driverpeer:", why)
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "driverpeer:", err)
	os.Exit(1)
}
