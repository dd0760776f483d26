package session

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/securemsg/storage/store"
)

// MaxOneTimePrekeys bounds the one-time prekeys held by Prekeys and offered
// in a Bundle.
const MaxOneTimePrekeys = 1000

// MaxRetiredSignedPrekeys bounds the retired signed prekeys Prekeys keeps
// for their grace period; rotating more often drops the oldest early.
const MaxRetiredSignedPrekeys = 16

const (
	prekeysVersion1 = 1 // no retired signed prekeys, signature of signedPrekeyMessageV1
	prekeysVersion  = 2
	// signedPrekeyDomainV1 is the signature format of version 1 records,
	// which covered the signed prekey only; it is only ever verified, when
	// such a record is decoded.
	signedPrekeyDomainV1  = "securemsg/session/v1 signed prekey\x00"
	signedPrekeyDomain    = "securemsg/session/v2 signed prekey\x00"
	ed25519SignatureBytes = ed25519.SignatureSize
)

// OneTimePrekey is a published one-time prekey: the responder holds the
// private half until an initiation consumes it.
type OneTimePrekey struct {
	ID  uint32
	Key [KeySize]byte // X25519 public key
}

// Bundle is what a device publishes to the directory so that others can
// initiate sessions with it while it is offline. The directory hands out
// at most one one-time prekey per fetch.
type Bundle struct {
	Address        store.DeviceAddress
	Identity       PublicIdentity
	SignedPrekeyID uint32
	SignedPrekey   [KeySize]byte // X25519 public key
	Signature      []byte        // Ed25519 over signedPrekeyMessage
	OneTimePrekeys []OneTimePrekey
}

// signedPrekeyMessage is the domain-separated message signed by the
// identity's Ed25519 key: "securemsg/session/v2 signed prekey\x00" ||
// Ed25519 identity key || X25519 identity key || u32 id || signed prekey.
// Covering both identity keys binds the X25519 key used in X3DH to the
// signing key, so a directory cannot pair a device's signature with
// another X25519 identity key.
func signedPrekeyMessage(identity PublicIdentity, id uint32, key [KeySize]byte) []byte {
	m := make([]byte, 0, len(signedPrekeyDomain)+3*KeySize+4)
	m = append(m, signedPrekeyDomain...)
	m = append(m, identity.SigningKey[:]...)
	m = append(m, identity.DHKey[:]...)
	m = binary.BigEndian.AppendUint32(m, id)
	return append(m, key[:]...)
}

// signedPrekeyMessageV1 is the message version 1 records were signed
// over: "securemsg/session/v1 signed prekey\x00" || u32 id || key.
func signedPrekeyMessageV1(id uint32, key [KeySize]byte) []byte {
	m := make([]byte, 0, len(signedPrekeyDomainV1)+4+KeySize)
	m = append(m, signedPrekeyDomainV1...)
	m = binary.BigEndian.AppendUint32(m, id)
	return append(m, key[:]...)
}

// Verify checks the bundle's structure and the Ed25519 signature of its
// signed prekey, which covers both identity keys. A bad signature returns an error wrapping ErrBadSignature,
// a structural problem one wrapping ErrInvalidBundle.
func (b Bundle) Verify() error {
	if err := b.Address.Validate(); err != nil {
		return fmt.Errorf("%w: address: %w", ErrInvalidBundle, err)
	}
	if len(b.OneTimePrekeys) > MaxOneTimePrekeys {
		return fmt.Errorf("%w: %d one-time prekeys, at most %d", ErrInvalidBundle, len(b.OneTimePrekeys), MaxOneTimePrekeys)
	}
	seen := make(map[uint32]bool, len(b.OneTimePrekeys))
	for _, k := range b.OneTimePrekeys {
		if seen[k.ID] {
			return fmt.Errorf("%w: duplicate one-time prekey id %d", ErrInvalidBundle, k.ID)
		}
		seen[k.ID] = true
	}
	if len(b.Signature) != ed25519SignatureBytes ||
		!ed25519.Verify(b.Identity.SigningKey[:], signedPrekeyMessage(b.Identity, b.SignedPrekeyID, b.SignedPrekey), b.Signature) {
		return ErrBadSignature // the caller names the bundle
	}
	return nil
}

// Clone returns a deep copy of the bundle.
func (b Bundle) Clone() Bundle {
	b.Signature = slices.Clone(b.Signature)
	b.OneTimePrekeys = slices.Clone(b.OneTimePrekeys)
	return b
}

type oneTimePair struct {
	id uint32
	kp keyPair
}

// retiredPrekey is a replaced signed prekey, still accepted until expires
// (Unix seconds).
type retiredPrekey struct {
	id      uint32
	kp      keyPair
	expires int64
}

// Prekeys is a device's private prekey state: a signed prekey pair with its
// id and signature, the retired signed prekeys still in their grace period
// (see Rotate), and the one-time prekey pairs not yet consumed. Respond
// removes the one-time prekey it uses, so each is used at most once; the
// caller persists Prekeys (sealed) after every change. Prekeys is not safe
// for concurrent use.
type Prekeys struct {
	identity  PublicIdentity
	signedID  uint32
	signed    keyPair
	signature []byte
	// legacy: signature is over signedPrekeyMessageV1 (decoded from a
	// version 1 record) until Upgrade re-signs it.
	legacy  bool
	retired []retiredPrekey // newest first
	oneTime []oneTimePair   // ascending ids
	nextID  uint32
}

// NewPrekeys creates a signed prekey, signed by id, and nOneTime one-time
// prekeys (0 <= nOneTime <= MaxOneTimePrekeys). The signed prekey id is
// random; one-time prekey ids count up from 1. A nil rand means
// crypto/rand.
func NewPrekeys(rand io.Reader, id *Identity, nOneTime int) (*Prekeys, error) {
	if id == nil {
		return nil, fmt.Errorf("%w: nil identity", store.ErrInvalidArgument)
	}
	rand, err := randSource(rand)
	if err != nil {
		return nil, err
	}
	var idb [4]byte
	if _, err := io.ReadFull(rand, idb[:]); err != nil {
		return nil, fmt.Errorf("session: new prekeys: %w", err)
	}
	signed, err := generateKeyPair(rand)
	if err != nil {
		return nil, err
	}
	p := &Prekeys{
		identity: id.Public(),
		signedID: binary.BigEndian.Uint32(idb[:]),
		signed:   signed,
		nextID:   1,
	}
	p.signature = ed25519.Sign(id.signing, signedPrekeyMessage(p.identity, p.signedID, signed.pub))
	if err := p.AddOneTime(rand, nOneTime); err != nil {
		return nil, err
	}
	return p, nil
}

// AddOneTime generates n more one-time prekeys (replenishment). The total
// may not exceed MaxOneTimePrekeys. Ids are never reused. A nil rand
// means crypto/rand.
func (p *Prekeys) AddOneTime(rand io.Reader, n int) error {
	rand, err := randSource(rand)
	if err != nil {
		return err
	}
	if n < 0 || len(p.oneTime)+n > MaxOneTimePrekeys {
		return fmt.Errorf("%w: %d one-time prekeys (holding %d, at most %d)", store.ErrInvalidArgument, n, len(p.oneTime), MaxOneTimePrekeys)
	}
	if uint64(p.nextID)+uint64(n) > 1<<32-1 {
		return fmt.Errorf("%w: one-time prekey ids exhausted", store.ErrInvalidArgument)
	}
	added := make([]oneTimePair, 0, n)
	for range n {
		kp, err := generateKeyPair(rand)
		if err != nil {
			return err
		}
		added = append(added, oneTimePair{id: p.nextID + uint32(len(added)), kp: kp})
	}
	p.oneTime = append(p.oneTime, added...)
	p.nextID += uint32(n)
	return nil
}

// Replenish generates n new one-time prekeys (0 <= n <=
// MaxOneTimePrekeys) and returns their public halves. Unlike AddOneTime it
// makes room by dropping the oldest held keys when the total would exceed
// MaxOneTimePrekeys: those were handed out longest ago (a directory hands
// out keys in id order) and never used, and an initiation that still
// names one fails with ErrUnknownPrekey. Returns store.ErrInvalidArgument for n
// out of range or exhausted ids; on error p is unchanged.
func (p *Prekeys) Replenish(rand io.Reader, n int) ([]OneTimePrekey, error) {
	if n < 0 || n > MaxOneTimePrekeys {
		return nil, fmt.Errorf("%w: %d one-time prekeys, at most %d", store.ErrInvalidArgument, n, MaxOneTimePrekeys)
	}
	c := p.clone()
	if over := len(c.oneTime) + n - MaxOneTimePrekeys; over > 0 {
		c.oneTime = slices.Delete(c.oneTime, 0, over)
	}
	first := len(c.oneTime)
	if err := c.AddOneTime(rand, n); err != nil {
		return nil, err
	}
	out := make([]OneTimePrekey, 0, n)
	for _, o := range c.oneTime[first:] {
		out = append(out, OneTimePrekey{ID: o.id, Key: o.kp.pub})
	}
	*p = *c
	return out, nil
}

// Rotate replaces the signed prekey with a new one, signed by id (the
// owner of p, else store.ErrInvalidArgument), with a new random id. The
// replaced one is retired: Respond still accepts initiations naming it
// until now+grace (grace >= 0), so that initiators holding the previous
// bundle are not refused; Expire drops it afterwards. At most
// MaxRetiredSignedPrekeys are kept; retired keys already expired at now
// are dropped. A nil rand means crypto/rand. On error p is unchanged.
func (p *Prekeys) Rotate(rand io.Reader, id *Identity, now time.Time, grace time.Duration) error {
	if id == nil || id.Public() != p.identity {
		return fmt.Errorf("%w: rotate: identity is not the prekeys' owner", store.ErrInvalidArgument)
	}
	if grace < 0 {
		return fmt.Errorf("%w: rotate: negative grace period %s", store.ErrInvalidArgument, grace)
	}
	rand, err := randSource(rand)
	if err != nil {
		return err
	}
	c := p.clone()
	c.Expire(now)
	used := func(v uint32) bool {
		return v == c.signedID || slices.ContainsFunc(c.retired, func(r retiredPrekey) bool { return r.id == v })
	}
	var newID uint32
	for {
		var idb [4]byte
		if _, err := io.ReadFull(rand, idb[:]); err != nil {
			return fmt.Errorf("session: rotate signed prekey: %w", err)
		}
		if newID = binary.BigEndian.Uint32(idb[:]); !used(newID) {
			break
		}
	}
	kp, err := generateKeyPair(rand)
	if err != nil {
		return err
	}
	old := retiredPrekey{id: c.signedID, kp: c.signed, expires: now.Add(grace).Unix()}
	c.retired = append([]retiredPrekey{old}, c.retired...)
	if len(c.retired) > MaxRetiredSignedPrekeys {
		c.retired = c.retired[:MaxRetiredSignedPrekeys]
	}
	c.signedID, c.signed, c.legacy = newID, kp, false
	c.signature = ed25519.Sign(id.signing, signedPrekeyMessage(c.identity, newID, kp.pub))
	*p = *c
	return nil
}

// Expire drops the retired signed prekeys whose grace period ended at or
// before now, and reports whether it dropped any.
func (p *Prekeys) Expire(now time.Time) bool {
	n := len(p.retired)
	p.retired = slices.DeleteFunc(slices.Clone(p.retired), func(r retiredPrekey) bool { return r.expires <= now.Unix() })
	return len(p.retired) != n
}

// Upgrade re-signs the signed prekey of prekeys decoded from a version 1
// record, whose signature covered the signed prekey only, with the current
// format (both identity keys): until then Bundle returns a bundle that
// does not verify. It does nothing for current records. id must be the
// owner of p, else store.ErrInvalidArgument.
func (p *Prekeys) Upgrade(id *Identity) error {
	if id == nil || id.Public() != p.identity {
		return fmt.Errorf("%w: upgrade: identity is not the prekeys' owner", store.ErrInvalidArgument)
	}
	if p.legacy {
		p.signature = ed25519.Sign(id.signing, signedPrekeyMessage(p.identity, p.signedID, p.signed.pub))
		p.legacy = false
	}
	return nil
}

// signedPair returns the current or a retired signed prekey pair by id.
func (p *Prekeys) signedPair(id uint32) (keyPair, bool) {
	if id == p.signedID {
		return p.signed, true
	}
	for _, r := range p.retired {
		if r.id == id {
			return r.kp, true
		}
	}
	return keyPair{}, false
}

// SignedPrekeyID returns the id of the signed prekey.
func (p *Prekeys) SignedPrekeyID() uint32 { return p.signedID }

// Bundle returns the public bundle for the device at addr, offering every
// one-time prekey still held.
func (p *Prekeys) Bundle(addr store.DeviceAddress) Bundle {
	b := Bundle{
		Address:        addr,
		Identity:       p.identity,
		SignedPrekeyID: p.signedID,
		SignedPrekey:   p.signed.pub,
		Signature:      slices.Clone(p.signature),
		OneTimePrekeys: make([]OneTimePrekey, 0, len(p.oneTime)),
	}
	for _, o := range p.oneTime {
		b.OneTimePrekeys = append(b.OneTimePrekeys, OneTimePrekey{ID: o.id, Key: o.kp.pub})
	}
	return b
}

// clone returns a deep copy of p.
func (p *Prekeys) clone() *Prekeys {
	c := *p
	c.signature = slices.Clone(p.signature)
	c.retired = slices.Clone(p.retired)
	c.oneTime = slices.Clone(p.oneTime)
	return &c
}

func (p *Prekeys) findOneTime(id uint32) (int, bool) {
	return slices.BinarySearchFunc(p.oneTime, id, func(o oneTimePair, id uint32) int {
		switch {
		case o.id < id:
			return -1
		case o.id > id:
			return 1
		}
		return 0
	})
}

func (p *Prekeys) removeOneTime(id uint32) {
	if i, ok := p.findOneTime(id); ok {
		p.oneTime = slices.Delete(p.oneTime, i, i+1)
	}
}

// MarshalBinary encodes the private prekey state: version byte (2), owner
// identity (64), signed prekey id (u32), signed prekey private key (32),
// signature (64), next one-time id (u32), retired signed prekeys (u8
// count, then id u32, private key 32, expiry in Unix seconds u64), count
// of one-time prekeys (u16), then per one-time prekey its id (u32) and
// private key (32). Version 1 had no retired signed prekeys and a
// signature over the signed prekey only; UnmarshalPrekeys still reads it.
// The output is secret.
func (p *Prekeys) MarshalBinary() ([]byte, error) {
	w := writer{b: make([]byte, 0, 1+64+4+32+64+4+1+len(p.retired)*44+2+len(p.oneTime)*36)}
	w.u8(prekeysVersion)
	w.identity(p.identity)
	w.u32(p.signedID)
	w.key(p.signed.priv)
	w.raw(p.signature)
	w.u32(p.nextID)
	w.u8(byte(len(p.retired)))
	for _, r := range p.retired {
		w.u32(r.id)
		w.key(r.kp.priv)
		w.u64(uint64(r.expires))
	}
	w.u16(uint16(len(p.oneTime)))
	for _, o := range p.oneTime {
		w.u32(o.id)
		w.key(o.kp.priv)
	}
	return w.b, nil
}

// UnmarshalPrekeys decodes the output of Prekeys.MarshalBinary (version 2,
// or version 1, whose signature the owner must renew with Upgrade).
// Invalid input, or a signature that does not verify, returns an error
// wrapping ErrMalformedState.
func UnmarshalPrekeys(b []byte) (*Prekeys, error) {
	p, err := unmarshalPrekeys(b)
	if err != nil {
		return nil, fmt.Errorf("%w: prekeys: %w", ErrMalformedState, err)
	}
	return p, nil
}

func unmarshalPrekeys(b []byte) (*Prekeys, error) {
	r := reader{b: b}
	v := r.u8()
	if r.err == nil && v != prekeysVersion1 && v != prekeysVersion {
		return nil, fmt.Errorf("unknown version %d", v)
	}
	p := &Prekeys{identity: r.identity(), signedID: r.u32(), legacy: v == prekeysVersion1}
	p.signed.priv = r.key()
	p.signature = slices.Clone(r.take(ed25519SignatureBytes))
	p.nextID = r.u32()
	if v == prekeysVersion {
		n := int(r.u8())
		if r.err == nil && n > MaxRetiredSignedPrekeys {
			return nil, fmt.Errorf("%d retired signed prekeys, at most %d", n, MaxRetiredSignedPrekeys)
		}
		for i := 0; i < n && r.err == nil; i++ {
			rp := retiredPrekey{id: r.u32()}
			rp.kp.priv = r.key()
			rp.expires = int64(r.u64())
			if r.err != nil {
				break
			}
			if _, dup := p.signedPair(rp.id); dup {
				return nil, fmt.Errorf("signed prekey id %d twice", rp.id)
			}
			pub, err := x25519Public(rp.kp.priv)
			if err != nil {
				return nil, err
			}
			rp.kp.pub = pub
			p.retired = append(p.retired, rp)
		}
	}
	n := int(r.u16())
	if r.err == nil && n > MaxOneTimePrekeys {
		return nil, fmt.Errorf("%d one-time prekeys, at most %d", n, MaxOneTimePrekeys)
	}
	for i := 0; i < n && r.err == nil; i++ {
		o := oneTimePair{id: r.u32()}
		o.kp.priv = r.key()
		if r.err != nil {
			break
		}
		if o.id >= p.nextID || (len(p.oneTime) > 0 && o.id <= p.oneTime[len(p.oneTime)-1].id) {
			return nil, fmt.Errorf("one-time prekey id %d out of order", o.id)
		}
		pub, err := x25519Public(o.kp.priv)
		if err != nil {
			return nil, err
		}
		o.kp.pub = pub
		p.oneTime = append(p.oneTime, o)
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	pub, err := x25519Public(p.signed.priv)
	if err != nil {
		return nil, err
	}
	p.signed.pub = pub
	msg := signedPrekeyMessage(p.identity, p.signedID, pub)
	if p.legacy {
		msg = signedPrekeyMessageV1(p.signedID, pub)
	}
	if !ed25519.Verify(p.identity.SigningKey[:], msg, p.signature) {
		return nil, fmt.Errorf("%w: stored signature", ErrBadSignature)
	}
	return p, nil
}
