package session_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

func TestConversationBothWaysInterleaved(t *testing.T) {
	alice := newDevice(t, "alice", 1, 5)
	bob := newDevice(t, "bob", 7, 5)
	as, bs := establish(t, alice, bob)

	require.True(t, as.Initiating())
	require.False(t, bs.Initiating())
	require.Equal(t, as.InitiationID(), bs.InitiationID())
	require.Equal(t, bob.addr, as.Remote())
	require.Equal(t, alice.addr, bs.Remote())
	require.True(t, as.RemoteIdentity().Equal(bob.id.Public()))
	require.True(t, bs.RemoteIdentity().Equal(alice.id.Public()))
	require.Equal(t, alice.addr, as.Initiator())
	require.Equal(t, alice.addr, bs.Initiator())
	require.Equal(t, 4, bob.pk.OneTimeCount(), "one one-time prekey consumed")

	// Each step: who sends how many messages in a row before the other
	// reads them all. Runs of several messages in one direction and
	// frequent switches exercise chain steps and DH ratchet steps.
	steps := []struct {
		fromAlice bool
		n         int
	}{
		{true, 2}, {false, 1}, {true, 1}, {false, 3}, {false, 2}, {true, 4},
		{true, 1}, {false, 1}, {true, 1}, {false, 1}, {true, 5}, {false, 5},
	}
	for i, st := range steps {
		from, to := as, bs
		if !st.fromAlice {
			from, to = bs, as
		}
		envs := make([]session.Envelope, st.n)
		for j := range envs {
			envs[j] = encrypt(t, from, msg("m", i*100+j))
			if from == as && i > 0 {
				require.Nil(t, envs[j].Initiation, "alice stops sending the initiation header once bob replied")
			}
		}
		for j, env := range envs {
			require.Equal(t, from.Local(), env.Sender)
			require.Equal(t, to.Local(), env.Recipient)
			decrypt(t, to, env, msg("m", i*100+j))
		}
		if i == 1 {
			require.False(t, as.Initiating())
		}
	}
}

func TestInitiationHeaderOnEveryEnvelopeUntilReply(t *testing.T) {
	alice := newDevice(t, "alice", 1, 1)
	bob := newDevice(t, "bob", 1, 1)
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	e0 := encrypt(t, as, "zero")
	e1 := encrypt(t, as, "one")
	e2 := encrypt(t, as, "two")
	for _, e := range []session.Envelope{e0, e1, e2} {
		require.NotNil(t, e.Initiation)
		require.Equal(t, as.InitiationID(), e.Initiation.ID)
		require.True(t, e.Initiation.HasOneTimePrekey)
	}

	// e0 is lost: bob completes the initiation from e2, then e1 arrives.
	bs, pt, err := session.Respond(bob.id, bob.addr, bob.pk, e2)
	require.NoError(t, err)
	require.Equal(t, "two", string(pt))
	require.Zero(t, bob.pk.OneTimeCount())
	decrypt(t, bs, e1, "one")

	// The one-time prekey is gone: the initiation cannot be completed twice.
	_, _, err = session.Respond(bob.id, bob.addr, bob.pk, e0)
	require.ErrorIs(t, err, session.ErrUnknownPrekey)
	// But the existing session accepts the late first envelope.
	decrypt(t, bs, e0, "zero")
	_, err = bs.Decrypt(e0)
	require.ErrorIs(t, err, session.ErrReplay)

	reply := encrypt(t, bs, "ack")
	require.Nil(t, reply.Initiation)
	decrypt(t, as, reply, "ack")
	require.False(t, as.Initiating())
	require.Nil(t, encrypt(t, as, "after").Initiation)
}

func TestBundleWithoutOneTimePrekey(t *testing.T) {
	alice := newDevice(t, "alice", 1, 0)
	bob := newDevice(t, "bob", 1, 0)
	as, bs := establish(t, alice, bob)
	decrypt(t, as, encrypt(t, bs, "r"), "r")
	decrypt(t, bs, encrypt(t, as, "s"), "s")
}

func TestRespondErrors(t *testing.T) {
	alice := newDevice(t, "alice", 1, 1)
	bob := newDevice(t, "bob", 1, 1)
	carol := newDevice(t, "carol", 1, 1)
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	env := encrypt(t, as, "x")

	noInit := env.Clone()
	noInit.Initiation = nil
	staleSPK := env.Clone()
	staleSPK.Initiation.SignedPrekeyID++
	unknownOPK := env.Clone()
	unknownOPK.Initiation.OneTimePrekeyID = 999
	otherIdentity := env.Clone()
	otherIdentity.Initiation.Identity = carol.id.Public()
	otherAnswer := env.Clone()
	otherAnswer.Header.Answers = carol.bundle().SignedPrekey

	tests := []struct {
		name string
		who  *device
		env  session.Envelope
		want error
	}{
		{"no initiation", bob, noInit, session.ErrNoInitiation},
		{"stale signed prekey", bob, staleSPK, session.ErrUnknownPrekey},
		{"unknown one-time prekey", bob, unknownOPK, session.ErrUnknownPrekey},
		{"forged initiator identity", bob, otherIdentity, session.ErrDecrypt},
		{"answers another key than the signed prekey", bob, otherAnswer, session.ErrDecrypt},
		{"not addressed to me", carol, env, session.ErrWrongSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := tt.who.pk.MarshalBinary()
			require.NoError(t, err)
			_, _, err = session.Respond(tt.who.id, tt.who.addr, tt.who.pk, tt.env)
			require.ErrorIs(t, err, tt.want)
			after, err := tt.who.pk.MarshalBinary()
			require.NoError(t, err)
			require.Equal(t, before, after, "a failed Respond consumes no prekey")
		})
	}
	_, _, err = session.Respond(bob.id, bob.addr, bob.pk, env)
	require.NoError(t, err)
}

func TestOutOfOrderAndDuplicates(t *testing.T) {
	_, _, as, bs := confirmed(t)

	// Chain 1: ten messages delivered shuffled, every one twice.
	var chain1 []session.Envelope
	for i := range 10 {
		chain1 = append(chain1, encrypt(t, as, msg("a1", i)))
	}
	order := []int{7, 2, 9, 0, 5, 1, 8, 3, 6, 4}
	for _, i := range order[:5] {
		decrypt(t, bs, chain1[i], msg("a1", i))
		before := stateOf(t, bs)
		_, err := bs.Decrypt(chain1[i])
		require.ErrorIs(t, err, session.ErrReplay)
		require.Equal(t, before, stateOf(t, bs))
	}

	// Bob replies (ratchet step on both sides), alice sends chain 2.
	decrypt(t, as, encrypt(t, bs, "b"), "b")
	var chain2 []session.Envelope
	for i := range 4 {
		chain2 = append(chain2, encrypt(t, as, msg("a2", i)))
	}
	// Deliver chain 2 backwards, interleaved with the rest of chain 1.
	for k := range 5 {
		if k < 4 {
			decrypt(t, bs, chain2[3-k], msg("a2", 3-k))
		}
		i := order[5+k]
		decrypt(t, bs, chain1[i], msg("a1", i))
	}
	// Every envelope again: all replays, state unchanged.
	before := stateOf(t, bs)
	for _, env := range append(append([]session.Envelope{}, chain1...), chain2...) {
		_, err := bs.Decrypt(env)
		require.ErrorIs(t, err, session.ErrReplay)
	}
	require.Equal(t, before, stateOf(t, bs))
	decrypt(t, as, encrypt(t, bs, "still working"), "still working")
}

func TestSkippedKeyBoundPerStep(t *testing.T) {
	_, _, as, bs := confirmed(t)
	envs := make([]session.Envelope, session.MaxSkip+2)
	for i := range envs {
		envs[i] = encrypt(t, as, msg("m", i))
	}
	// Message MaxSkip+1 would skip MaxSkip+1 keys: refused, nothing changes.
	before := stateOf(t, bs)
	_, err := bs.Decrypt(envs[session.MaxSkip+1])
	require.ErrorIs(t, err, session.ErrTooManySkipped)
	require.Equal(t, before, stateOf(t, bs))
	// Message MaxSkip skips exactly MaxSkip keys: accepted.
	decrypt(t, bs, envs[session.MaxSkip], msg("m", session.MaxSkip))
	decrypt(t, bs, envs[session.MaxSkip+1], msg("m", session.MaxSkip+1))
	for _, i := range []int{0, 500, session.MaxSkip - 1} {
		decrypt(t, bs, envs[i], msg("m", i))
	}
}

func TestSkippedKeyBoundOnRatchetStep(t *testing.T) {
	_, _, as, bs := confirmed(t)
	// Bob sees message 0 of alice's current chain and replies with a new
	// ratchet key; alice's next MaxSkip+1 messages of that chain are lost.
	decrypt(t, bs, encrypt(t, as, "a0"), "a0")
	reply := encrypt(t, bs, "reply")
	for i := range session.MaxSkip + 1 {
		_, err := as.Encrypt([]byte(msg("lost", i)))
		require.NoError(t, err)
	}
	// The reply makes alice ratchet: her next message has PN = MaxSkip+2,
	// so bob would have to skip MaxSkip+1 keys of the previous chain.
	decrypt(t, as, reply, "reply")
	env := encrypt(t, as, "next chain")
	require.Equal(t, uint32(session.MaxSkip+2), env.Header.PN)
	require.Zero(t, env.Header.N)
	before := stateOf(t, bs)
	_, err := bs.Decrypt(env)
	require.ErrorIs(t, err, session.ErrTooManySkipped)
	require.Equal(t, before, stateOf(t, bs))
}

func TestSkippedKeyStoreEvictsOldest(t *testing.T) {
	_, _, as, bs := confirmed(t)
	const rounds = 3 // 3 * MaxSkip skipped keys > MaxSkippedKeys
	firstOfRound := make([]session.Envelope, rounds)
	for r := range rounds {
		for i := range session.MaxSkip + 1 {
			env := encrypt(t, as, msg("r", r*10000+i))
			if i == 0 {
				firstOfRound[r] = env
			}
			if i == session.MaxSkip {
				decrypt(t, bs, env, msg("r", r*10000+i))
			}
		}
		decrypt(t, as, encrypt(t, bs, "turn"), "turn")
	}
	// Round 0's keys were evicted: its envelopes are refused like replays.
	before := stateOf(t, bs)
	_, err := bs.Decrypt(firstOfRound[0])
	require.ErrorIs(t, err, session.ErrReplay)
	require.Equal(t, before, stateOf(t, bs))
	// Rounds 1 and 2 are still held.
	decrypt(t, bs, firstOfRound[1], msg("r", 10000))
	decrypt(t, bs, firstOfRound[2], msg("r", 20000))
	// The stored state respects the cap.
	st := stateOf(t, bs)
	require.Less(t, len(st), 700+session.MaxSkippedKeys*68)
}

func TestReplayAndBitFlipLeaveStateUnchanged(t *testing.T) {
	alice, bob, as, bs := confirmed(t)
	_ = alice
	_ = bob
	env := encrypt(t, as, "the real message")
	raw, err := env.MarshalBinary()
	require.NoError(t, err)

	before := stateOf(t, bs)
	for bit := range len(raw) * 8 {
		mutated := append([]byte(nil), raw...)
		mutated[bit/8] ^= 1 << (bit % 8)
		e, err := session.UnmarshalEnvelope(mutated)
		if err != nil {
			require.ErrorIs(t, err, session.ErrMalformedEnvelope, "bit %d", bit)
			continue
		}
		_, err = bs.Decrypt(e)
		require.Error(t, err, "bit %d accepted", bit)
		require.True(t, errors.Is(err, session.ErrDecrypt) || errors.Is(err, session.ErrWrongSession) ||
			errors.Is(err, session.ErrTooManySkipped) || errors.Is(err, session.ErrReplay), "bit %d: %v", bit, err)
		require.Equal(t, before, stateOf(t, bs), "bit %d changed the state", bit)
	}
	decrypt(t, bs, env, "the real message")
	after := stateOf(t, bs)
	_, err = bs.Decrypt(env)
	require.ErrorIs(t, err, session.ErrReplay)
	require.Equal(t, after, stateOf(t, bs))
}

func TestTamperedInitiationRejected(t *testing.T) {
	alice := newDevice(t, "alice", 1, 1)
	bob := newDevice(t, "bob", 1, 1)
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)
	raw, err := encrypt(t, as, "first").MarshalBinary()
	require.NoError(t, err)
	pkBefore, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	// One bit per byte (a different bit position each time): every field
	// of the initiation header is covered at a fraction of the X25519 cost.
	for i := range raw {
		mutated := append([]byte(nil), raw...)
		mutated[i] ^= 1 << (i % 8)
		e, err := session.UnmarshalEnvelope(mutated)
		if err != nil {
			continue
		}
		_, _, err = session.Respond(bob.id, bob.addr, bob.pk, e)
		require.Error(t, err, "byte %d accepted", i)
	}
	pkAfter, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, pkBefore, pkAfter, "no prekey consumed by a rejected initiation")
	_, _, err = session.Respond(bob.id, bob.addr, bob.pk, mustUnmarshal(t, raw))
	require.NoError(t, err, "the genuine envelope is still accepted")
	require.Zero(t, bob.pk.OneTimeCount())
}

func TestWrongSession(t *testing.T) {
	_, _, as, bs := confirmed(t)
	carol := newDevice(t, "carol", 1, 1)
	cs, err := session.Initiate(rand.Reader, carol.id, carol.addr, newDevice(t, "bob", 1, 1).bundle())
	require.NoError(t, err)
	fromCarol := encrypt(t, cs, "hi")

	before := stateOf(t, bs)
	_, err = bs.Decrypt(fromCarol)
	require.ErrorIs(t, err, session.ErrWrongSession)
	// Alice's own envelope given back to alice's session.
	_, err = as.Decrypt(encrypt(t, as, "loop"))
	require.ErrorIs(t, err, session.ErrWrongSession)
	require.Equal(t, before, stateOf(t, bs))
}

func TestBundleVerify(t *testing.T) {
	bob := newDevice(t, "bob", 1, 2)
	other := newDevice(t, "mallory", 1, 0)
	alice := newDevice(t, "alice", 1, 0)
	good := bob.pk.Bundle(bob.addr)
	require.NoError(t, good.Verify())

	tests := []struct {
		name   string
		mutate func(*session.Bundle)
		want   error
	}{
		{"flipped signature", func(b *session.Bundle) { b.Signature[5] ^= 1 }, session.ErrBadSignature},
		{"short signature", func(b *session.Bundle) { b.Signature = b.Signature[:10] }, session.ErrBadSignature},
		{"no signature", func(b *session.Bundle) { b.Signature = nil }, session.ErrBadSignature},
		{"substituted signed prekey", func(b *session.Bundle) { b.SignedPrekey = other.pk.Bundle(other.addr).SignedPrekey }, session.ErrBadSignature},
		{"other signed prekey id", func(b *session.Bundle) { b.SignedPrekeyID++ }, session.ErrBadSignature},
		{"substituted identity", func(b *session.Bundle) { b.Identity = other.id.Public() }, session.ErrBadSignature},
		{"invalid address", func(b *session.Bundle) { b.Address.UserID = "" }, session.ErrInvalidBundle},
		{"duplicate one-time ids", func(b *session.Bundle) { b.OneTimePrekeys[1].ID = b.OneTimePrekeys[0].ID }, session.ErrInvalidBundle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := good.Clone()
			tt.mutate(&b)
			require.ErrorIs(t, b.Verify(), tt.want)
			s, err := session.Initiate(rand.Reader, alice.id, alice.addr, b)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, s)
		})
	}
	require.NoError(t, good.Verify(), "Clone kept the original intact")

	_, err := session.Initiate(rand.Reader, bob.id, bob.addr, good)
	require.ErrorIs(t, err, store.ErrInvalidArgument, "a bundle for oneself")
}

func TestStateRoundTripMidConversation(t *testing.T) {
	alice := newDevice(t, "alice", 1, 2)
	bob := newDevice(t, "bob", 2, 2)
	as, bs := establish(t, alice, bob)

	// Persist and restore everything while alice is still initiating and
	// bob holds skipped keys.
	e1 := encrypt(t, as, "one")
	e2 := encrypt(t, as, "two")
	decrypt(t, bs, e2, "two")

	restore := func(s *session.Session) *session.Session {
		b := stateOf(t, s)
		r, err := session.UnmarshalSession(b)
		require.NoError(t, err)
		require.Equal(t, b, stateOf(t, r), "deterministic encoding")
		return r
	}
	as, bs = restore(as), restore(bs)
	require.True(t, as.Initiating())
	require.NotNil(t, encrypt(t, as, "three").Initiation) // bob never sees it
	decrypt(t, bs, e1, "one")                             // from the restored skipped keys

	idBytes, err := bob.id.MarshalBinary()
	require.NoError(t, err)
	bobID, err := session.UnmarshalIdentity(idBytes)
	require.NoError(t, err)
	require.Equal(t, bob.id.Public(), bobID.Public())
	pkBytes, err := bob.pk.MarshalBinary()
	require.NoError(t, err)
	bobPK, err := session.UnmarshalPrekeys(pkBytes)
	require.NoError(t, err)
	require.Equal(t, bob.pk.Bundle(bob.addr), bobPK.Bundle(bob.addr))

	for i := range 6 {
		decrypt(t, as, encrypt(t, bs, msg("b", i)), msg("b", i))
		as, bs = restore(as), restore(bs)
		decrypt(t, bs, encrypt(t, as, msg("a", i)), msg("a", i))
	}
	require.False(t, as.Initiating())

	// A restored identity and prekeys can answer a new initiation.
	carol := newDevice(t, "carol", 1, 0)
	cs, err := session.Initiate(rand.Reader, carol.id, carol.addr, bobPK.Bundle(bob.addr))
	require.NoError(t, err)
	_, pt, err := session.Respond(bobID, bob.addr, bobPK, encrypt(t, cs, "from carol"))
	require.NoError(t, err)
	require.Equal(t, "from carol", string(pt))
}

// TestPinDecline: a declined change is forgotten and the pinned identity
// trusted as before; a later change is recorded again.
func TestPinDecline(t *testing.T) {
	bob := newDevice(t, "bob", 1, 1)
	mallory := newDevice(t, "bob", 1, 1)
	pin := session.NewPin(bob.addr, bob.id.Public())
	require.ErrorIs(t, pin.Check(mallory.id.Public()), session.ErrIdentityChanged)
	require.NoError(t, pin.Decline(mallory.id.Public()))
	require.Nil(t, pin.Changed)
	require.Equal(t, bob.id.Public(), pin.Identity)
	require.NoError(t, pin.Check(bob.id.Public()))
	require.ErrorIs(t, pin.Check(mallory.id.Public()), session.ErrIdentityChanged, "a declined identity seen again is a change again")
}

func TestIdentityChangeBlockedUntilAccepted(t *testing.T) {
	alice := newDevice(t, "alice", 1, 1)
	bob := newDevice(t, "bob", 1, 1)

	// First use: pin bob's identity.
	pin := session.NewPin(bob.addr, bob.bundle().Identity)
	require.NoError(t, pin.Check(bob.bundle().Identity))

	// Bob reinstalls: new identity, new bundle.
	bob2 := newDevice(t, "bob", 1, 1)
	newBundle := bob2.bundle()
	err := pin.Check(newBundle.Identity)
	require.ErrorIs(t, err, session.ErrIdentityChanged)
	var changed *session.IdentityChangedError
	require.ErrorAs(t, err, &changed)
	require.Equal(t, bob.addr, changed.Address)
	require.Equal(t, bob.id.Public(), changed.Pinned)
	require.Equal(t, bob2.id.Public(), changed.Observed)
	require.NotNil(t, pin.Changed)
	require.Equal(t, bob2.id.Public(), *pin.Changed)
	require.Contains(t, err.Error(), bob2.id.Public().String())

	// The client persists the pin; the change survives a reload and stays
	// blocked until accepted.
	b, err := pin.MarshalBinary()
	require.NoError(t, err)
	loaded, err := session.UnmarshalPin(b)
	require.NoError(t, err)
	require.Equal(t, pin, loaded)
	require.ErrorIs(t, loaded.Check(newBundle.Identity), session.ErrIdentityChanged)
	require.NoError(t, loaded.Check(bob.id.Public()), "the old identity is still trusted")

	// Only the identity the user verified is accepted: a later change
	// that replaced it is refused, and nothing changes.
	mallory := newDevice(t, "bob", 1, 1)
	before, err := loaded.MarshalBinary()
	require.NoError(t, err)
	err = loaded.Accept(mallory.id.Public())
	require.ErrorAs(t, err, &changed)
	require.Equal(t, bob2.id.Public(), changed.Observed, "the error names the change recorded now")
	after, err := loaded.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.ErrorIs(t, loaded.Decline(mallory.id.Public()), session.ErrIdentityChanged)
	after, err = loaded.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, before, after)

	require.NoError(t, loaded.Accept(bob2.id.Public()))
	require.Nil(t, loaded.Changed)
	require.NoError(t, loaded.Check(newBundle.Identity))
	require.ErrorIs(t, loaded.Check(bob.id.Public()), session.ErrIdentityChanged, "the old identity is now the changed one")
	loaded.Changed = nil
	require.ErrorIs(t, loaded.Accept(bob2.id.Public()), session.ErrNoIdentityChange)
	require.ErrorIs(t, loaded.Decline(bob2.id.Public()), session.ErrNoIdentityChange)

	b, err = loaded.MarshalBinary()
	require.NoError(t, err)
	again, err := session.UnmarshalPin(b)
	require.NoError(t, err)
	require.Equal(t, loaded, again)

	// With the change accepted, a session with the new identity works.
	as, bs := establish(t, alice, bob2)
	require.NoError(t, again.Check(as.RemoteIdentity()))
	decrypt(t, as, encrypt(t, bs, "new me"), "new me")
}

func TestIdentityBinaryRoundTrip(t *testing.T) {
	id, err := session.GenerateIdentity(seeded(1))
	require.NoError(t, err)
	id2, err := session.GenerateIdentity(seeded(1))
	require.NoError(t, err)
	require.Equal(t, id.Public(), id2.Public(), "deterministic with a deterministic reader")
	require.Len(t, id.Public().Fingerprint(), 32)

	pub := id.Public()
	b, err := pub.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, 65)
	got, err := session.UnmarshalPublicIdentity(b)
	require.NoError(t, err)
	require.True(t, got.Equal(pub))
	require.Equal(t, pub, got)

	other, err := session.GenerateIdentity(seeded(2))
	require.NoError(t, err)
	require.False(t, other.Public().Equal(pub))
	require.NotEqual(t, other.Public().Fingerprint(), pub.Fingerprint())

	_, err = session.GenerateIdentity(strings.NewReader("short"))
	require.Error(t, err)
}

func TestPlaintextSizeLimit(t *testing.T) {
	long := func(c string) string { return strings.Repeat(c, store.MaxUserIDLen) }
	alice := newDevice(t, long("a"), 1<<62, 1)
	bob := newDevice(t, long("b"), 1<<62, 1)
	as, err := session.Initiate(rand.Reader, alice.id, alice.addr, bob.bundle())
	require.NoError(t, err)

	before := stateOf(t, as)
	_, err = as.Encrypt(make([]byte, session.MaxPlaintextSize+1))
	require.ErrorIs(t, err, session.ErrMessageTooLarge)
	require.Equal(t, before, stateOf(t, as))

	env, err := as.Encrypt(make([]byte, session.MaxPlaintextSize))
	require.NoError(t, err)
	raw, err := env.MarshalBinary()
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), session.MaxEnvelopeSize)
	e, err := session.UnmarshalEnvelope(raw)
	require.NoError(t, err)
	_, pt, err := session.Respond(bob.id, bob.addr, bob.pk, e)
	require.NoError(t, err)
	require.Len(t, pt, session.MaxPlaintextSize)
}
