package client_test

// BenchmarkSendSessionRecord measures what a Send costs as the session
// record grows: every Send re-encodes and re-seals the whole record of
// the peer (current state, archived states, remembered base keys) and
// writes it in the transaction of the pending row.
//
//	go test -run '^$' -bench SendSessionRecord -benchtime 2s ./client/

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/transport/transporttest"
)

// recordShape is how much a session record with the peer holds.
type recordShape struct {
	name string
	// rejected: initiations of the peer that lost a collision.
	rejected int
	// restarts: times the peer started over (each archives a state, or
	// beyond MaxArchivedStates retires its base key).
	restarts int
	// skipped: message keys skipped in each state, ratchets: DH ratchet
	// steps of each state (previous ratchet keys kept, at most 8).
	skipped, ratchets int
	// atBounds: the record built must hold every bound's maximum.
	atBounds bool
}

var recordShapes = []recordShape{
	// A session used both ways, nothing lost.
	{name: "fresh", ratchets: 3},
	// The peer started over twice (a reinstall, a restore), some messages
	// never arrived, one collision.
	{name: "typical", rejected: 1, restarts: 2, skipped: 20, ratchets: 8},
	// Every bound reached: 40 rejected base keys, 40 archived states and
	// 41 retired base keys, 8 previous ratchet keys in each state, and
	// the peer makes each of the 41 states skip MaxSkippedKeys messages:
	// the record keeps MaxSkippedKeys for the current state and
	// MaxArchivedSkippedKeys for the archived ones together.
	{name: "max", rejected: session.MaxRejectedInitiations,
		restarts: session.MaxArchivedStates + session.MaxRetiredInitiations + 1,
		skipped:  session.MaxSkippedKeys, ratchets: 10, atBounds: true},
}

// builtRecord is a record self holds for peer, with what made it.
type builtRecord struct {
	self   *session.Identity
	prekey *session.Prekeys // self's, with no one-time prekey
	peer   session.PublicIdentity
	raw    []byte // the encoded record
	// lastPeer is the last envelope of the peer's that self received:
	// one of the record's current state.
	lastPeer session.Envelope
}

// buildRecord makes, with package session, the record that self holds
// for peer after the history of shape.
func buildRecord(b *testing.B, self, peer store.DeviceAddress, shape recordShape) builtRecord {
	b.Helper()
	var out builtRecord
	newID := func() (*session.Identity, *session.Prekeys) {
		id, err := session.GenerateIdentity(rand.Reader)
		must(b, err)
		pk, err := session.NewPrekeys(rand.Reader, id, 0)
		must(b, err)
		return id, pk
	}
	sid, spk := newID()
	pid, ppk := newID()
	local := session.Local{Identity: sid, Address: self, Prekeys: spk}
	recv := func(rec *session.Session, env session.Envelope) *session.Session {
		r, err := session.Receive(local, rec, env)
		must(b, err)
		out.lastPeer = env
		if r.Session == nil {
			return rec
		}
		return r.Session
	}
	enc := func(s *session.Session, text string) session.Envelope {
		env, err := s.Encrypt([]byte(text))
		must(b, err)
		return env
	}
	// self's own initiation, unanswered while the peer's collide with it
	// (self < peer: self's wins).
	rec, err := session.Initiate(rand.Reader, sid, self, ppk.Bundle(peer))
	must(b, err)
	first := enc(rec, "hello")
	for range shape.rejected {
		ps, err := session.Initiate(rand.Reader, pid, peer, spk.Bundle(self))
		must(b, err)
		rec = recv(rec, enc(ps, "collides"))
	}
	ps, _, err := session.Respond(pid, peer, ppk, first)
	must(b, err)
	// use gives the current state its ratchet steps and skipped keys.
	peerLocal := session.Local{Identity: pid, Address: peer, Prekeys: ppk}
	use := func(rec, ps *session.Session) *session.Session {
		for range shape.ratchets {
			rec = recv(rec, enc(ps, "ping"))
			r, err := session.Receive(peerLocal, ps, enc(rec, "pong"))
			must(b, err)
			ps = r.Session
		}
		if shape.skipped > 0 {
			// The peer sends skipped+1 messages of which only the last
			// arrives, at most MaxSkip at a time.
			for n := 0; n < shape.skipped; n += session.MaxSkip {
				gap := min(session.MaxSkip, shape.skipped-n)
				for range gap {
					enc(ps, "lost")
				}
				rec = recv(rec, enc(ps, "arrives"))
			}
		}
		return rec
	}
	rec = use(rec, ps)
	for i := range shape.restarts {
		ps, err = session.Initiate(rand.Reader, pid, peer, spk.Bundle(self))
		must(b, err)
		rec = recv(rec, enc(ps, "started over"))
		// Only the states that stay in the record are worth filling.
		if shape.restarts-i <= session.MaxArchivedStates+1 {
			rec = use(rec, ps)
		}
	}
	raw, err := rec.MarshalBinary()
	must(b, err)
	out.self, out.prekey, out.peer, out.raw = sid, spk, pid.Public(), raw
	return out
}

func BenchmarkSendSessionRecord(b *testing.B) {
	ctx := context.Background()
	self, peer := store.DeviceAddress{UserID: "bench-alice", DeviceID: 1}, store.DeviceAddress{UserID: "bench-bob", DeviceID: 1}
	pt := benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)
	for _, shape := range recordShapes {
		built := buildRecord(b, self, peer, shape)
		sid, spk, peerID, raw := built.self, built.prekey, built.peer, built.raw
		_, err := session.UnmarshalSession(raw)
		must(b, err)
		n := countRecord(b, raw)
		if shape.atBounds && (n.skipped != session.MaxSkippedKeys || n.archivedSkipped != session.MaxArchivedSkippedKeys ||
			n.archived != session.MaxArchivedStates ||
			n.rejected != session.MaxRejectedInitiations || n.retired != session.MaxRetiredInitiations) {
			b.Fatalf("%s: %d+%d skipped keys, %d archived states, %d+%d base keys: not every bound", shape.name,
				n.skipped, n.archivedSkipped, n.archived, n.rejected, n.retired)
		}
		keys, err := benchseed.NewKeyring()
		must(b, err)
		st, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), shape.name+".db"), keys)
		must(b, err)
		b.Cleanup(func() { st.Close() })
		secret, err := client.EncodeLocal(sid, spk)
		must(b, err)
		must(b, st.SaveLocalIdentity(ctx, store.LocalIdentity{Address: self, Secret: secret}))
		pin, err := session.NewPin(peer, peerID).MarshalBinary()
		must(b, err)
		must(b, st.SavePeer(ctx, peer, store.PeerState{Session: raw, Pin: pin}))
		net := transporttest.NewNetwork()
		cfg := client.Config{Store: st, Transport: net, Directory: net}
		drain := func(b *testing.B, i int) {
			if i%256 == 0 {
				b.StopTimer()
				_, err := net.Receive(ctx, peer)
				must(b, err)
				net.ResetCalls()
				b.StartTimer()
			}
		}
		report := func(b *testing.B) {
			stored, err := st.Peer(ctx, peer)
			must(b, err)
			b.ReportMetric(float64(len(stored.Session)), "record-B")
			b.ReportMetric(float64(len(stored.Session)+seal.Overhead), "sealed-B")
			b.ReportMetric(float64(n.archived), "archived")
			b.ReportMetric(float64(n.rejected+n.retired), "basekeys")
			b.ReportMetric(float64(n.skipped+n.archivedSkipped), "skipped")
		}
		// warm: the client has the record decoded (its peer cache), as
		// for every message after the first of a running client.
		b.Run(fmt.Sprintf("%s/warm", shape.name), func(b *testing.B) {
			c, err := client.Open(ctx, cfg)
			must(b, err)
			b.Cleanup(func() { c.Close() })
			_, err = c.Send(ctx, peer, pt) // load the record
			must(b, err)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				drain(b, i)
				i++
				if _, err := c.Send(ctx, peer, pt); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
		// first-send: a client just opened (untimed), so the Send also
		// reads, opens and decodes the record, as the first message after
		// a start does. SQLite's page cache and the OS's stay warm: this
		// is the client's peer cache being empty, not a cold disk.
		b.Run(fmt.Sprintf("%s/first-send", shape.name), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				drain(b, i)
				i++
				c, err := client.Open(ctx, cfg)
				must(b, err)
				b.StartTimer()
				if _, err := c.Send(ctx, peer, pt); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				c.Close()
				b.StartTimer()
			}
			report(b)
		})
	}
}
