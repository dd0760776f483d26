package client_test

// BenchmarkForgedEnvelopeAtClient measures what one forged envelope costs
// a running client, through Receive, against a session record at every
// bound (recordShapes' "max"): every envelope from a peer is tried under
// the send mutex before anything authenticates it, so this is what anyone
// who can reach the mailbox can make each envelope it makes up cost the
// client, one after another.
//
//	go test -run '^$' -bench ForgedEnvelopeAtClient -benchtime 200x -count 3 ./client/

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/transport/transporttest"
)

// forgedAtBounds is a client holding a record at every bound for peer,
// with envelopes of peer's address that fail authentication after all the
// work their header allows.
type forgedAtBounds struct {
	c       *client.Client
	st      store.Store
	peer    store.DeviceAddress
	forgeds []forgedEnvelope
	// bundle is the client's own prekey bundle, as a directory serves it.
	bundle session.Bundle
}

type forgedEnvelope struct {
	name string
	raw  []byte
}

func newForgedAtBounds(b *testing.B) *forgedAtBounds {
	b.Helper()
	ctx := context.Background()
	self, peer := store.DeviceAddress{UserID: "bench-alice", DeviceID: 1}, store.DeviceAddress{UserID: "bench-bob", DeviceID: 1} // self < peer: see buildRecord
	built := buildRecord(b, self, peer, recordShapes[len(recordShapes)-1])
	// self sends once on the current state, so that its ratchet key is
	// one the peer knows: a new ratchet key answering it is tried.
	rec, err := session.UnmarshalSession(built.raw)
	must(b, err)
	answer, err := rec.Encrypt([]byte("answer"))
	must(b, err)
	raw, err := rec.MarshalBinary()
	must(b, err)

	keys, err := benchseed.NewKeyring()
	must(b, err)
	st, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "forged.db"), keys)
	must(b, err)
	b.Cleanup(func() { st.Close() })
	secret, err := client.EncodeLocal(built.self, built.prekey)
	must(b, err)
	must(b, st.SaveLocalIdentity(ctx, store.LocalIdentity{Address: self, Secret: secret}))
	pin, err := session.NewPin(peer, built.peer).MarshalBinary()
	must(b, err)
	must(b, st.SavePeer(ctx, peer, store.PeerState{Session: raw, Pin: pin}))
	net := transporttest.NewNetwork()
	c, err := client.Open(ctx, client.Config{Store: st, Transport: net, Directory: net})
	must(b, err)
	b.Cleanup(func() { c.Close() })

	last := built.lastPeer
	encode := func(env session.Envelope) []byte {
		_, err := rand.Read(env.Ciphertext)
		must(b, err)
		out, err := env.MarshalBinary()
		must(b, err)
		return out
	}
	withHeader := func(h session.RatchetHeader) []byte {
		env := last.Clone()
		env.Header = h
		return encode(env)
	}
	var fresh [session.KeySize]byte
	_, err = rand.Read(fresh[:])
	must(b, err)
	// A made-up initiation from the peer's address, naming self's signed
	// prekey, MaxSkip ahead in its first chain.
	stranger, err := session.GenerateIdentity(rand.Reader)
	must(b, err)
	is, err := session.Initiate(rand.Reader, stranger, peer, built.prekey.Bundle(self))
	must(b, err)
	initiation, err := is.Encrypt([]byte("forged"))
	must(b, err)
	initiation.Header.N = session.MaxSkip
	return &forgedAtBounds{c: c, st: st, peer: peer, bundle: built.prekey.Bundle(self), forgeds: []forgedEnvelope{
		// The current state's ratchet key, MaxSkip ahead.
		{"current-chain", withHeader(session.RatchetHeader{DH: last.Header.DH, Answers: last.Header.Answers, PN: last.Header.PN, N: last.Header.N + session.MaxSkip})},
		// A ratchet key no state has seen, answering the current state's,
		// as far ahead as allowed in both chains.
		{"new-ratchet-key", withHeader(session.RatchetHeader{DH: fresh, Answers: answer.Header.DH, PN: last.Header.N + session.MaxSkip, N: session.MaxSkip})},
		{"initiation", encode(initiation)},
	}}
}

func BenchmarkForgedEnvelopeAtClient(b *testing.B) {
	ctx := context.Background()
	f := newForgedAtBounds(b)
	stored, err := f.st.Peer(ctx, f.peer)
	must(b, err)
	for _, fe := range f.forgeds {
		// Each fails at the tag, after all the work its header allows.
		if _, err := f.c.Receive(ctx, fe.raw); !errors.Is(err, session.ErrDecrypt) {
			b.Fatalf("%s: %v, want session.ErrDecrypt", fe.name, err)
		}
		b.Run(fe.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.c.Receive(ctx, fe.raw); err == nil {
					b.Fatal("a forged envelope was accepted")
				}
			}
			b.ReportMetric(float64(len(stored.Session)), "record-B")
		})
	}
}

// BenchmarkForgedInitiationAtClient measures what an initiation costs the
// client when it comes from an identity the attacker made, claiming the
// address of a contact whose record is at every bound: it authenticates
// (the attacker holds the keys it names), so the client gets as far as
// the pin, which refuses it with ErrIdentityChanged. "known-change" is
// every such initiation after the first, which recorded the identity as
// the contact's unaccepted change: it changes nothing. "new-identity"
// makes up a new identity each time, so each one records a change (a
// pin write).
//
//	go test -run '^$' -bench ForgedInitiationAtClient -benchtime 200x -count 3 ./client/
func BenchmarkForgedInitiationAtClient(b *testing.B) {
	ctx := context.Background()
	f := newForgedAtBounds(b)
	stored, err := f.st.Peer(ctx, f.peer)
	must(b, err)
	initiations := func(n int, sameIdentity bool) [][]byte {
		var id *session.Identity
		out := make([][]byte, n)
		for i := range out {
			if id == nil || !sameIdentity {
				id, err = session.GenerateIdentity(rand.Reader)
				must(b, err)
			}
			s, err := session.Initiate(rand.Reader, id, f.peer, f.bundle)
			must(b, err)
			env, err := s.Encrypt(client.MessageFrame(store.NewLogicalMessageID(), []byte("forged")))
			must(b, err)
			out[i], err = env.MarshalBinary()
			must(b, err)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		same bool
	}{{"known-change", true}, {"new-identity", false}} {
		envs := initiations(64, tt.same)
		// The first records the identity as the contact's change.
		if _, err := f.c.Receive(ctx, envs[0]); !errors.Is(err, session.ErrIdentityChanged) {
			b.Fatalf("%s: %v, want session.ErrIdentityChanged", tt.name, err)
		}
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := f.c.Receive(ctx, envs[i%len(envs)]); !errors.Is(err, session.ErrIdentityChanged) {
					b.Fatalf("%v, want session.ErrIdentityChanged", err)
				}
			}
			b.ReportMetric(float64(len(stored.Session)), "record-B")
		})
	}
}
