package session

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/securemsg/storage/ids"
)

// MaxOneTimePrekeys bounds the one-time prekeys held by Prekeys and offered
// in a Bundle.
const MaxOneTimePrekeys = 1000

const (
	prekeysVersion        = 1
	signedPrekeyDomain    = "securemsg/session/v1 signed prekey\x00"
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
	Address        ids.DeviceAddress
	Identity       PublicIdentity
	SignedPrekeyID uint32
	SignedPrekey   [KeySize]byte // X25519 public key
	Signature      []byte        // Ed25519 over signedPrekeyMessage
	OneTimePrekeys []OneTimePrekey
}

// signedPrekeyMessage is the domain-separated message signed by the
// identity key: "securemsg/session/v1 signed prekey\x00" || u32 id || key.
func signedPrekeyMessage(id uint32, key [KeySize]byte) []byte {
	m := make([]byte, 0, len(signedPrekeyDomain)+4+KeySize)
	m = append(m, signedPrekeyDomain...)
	m = binary.BigEndian.AppendUint32(m, id)
	return append(m, key[:]...)
}

// Verify checks the bundle's structure and the Ed25519 signature of its
// signed prekey. A bad signature returns an error wrapping ErrBadSignature,
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
		!ed25519.Verify(b.Identity.SigningKey[:], signedPrekeyMessage(b.SignedPrekeyID, b.SignedPrekey), b.Signature) {
		return fmt.Errorf("%w: bundle of %s", ErrBadSignature, b.Address)
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

// Prekeys is a device's private prekey state: a signed prekey pair with its
// id and signature, and the one-time prekey pairs not yet consumed. Respond
// removes the one-time prekey it uses, so each is used at most once; the
// caller persists Prekeys (sealed) after every change. Prekeys is not safe
// for concurrent use.
type Prekeys struct {
	identity  PublicIdentity
	signedID  uint32
	signed    keyPair
	signature []byte
	oneTime   []oneTimePair // ascending ids
	nextID    uint32
}

// NewPrekeys creates a signed prekey, signed by id, and nOneTime one-time
// prekeys (0 <= nOneTime <= MaxOneTimePrekeys). The signed prekey id is
// random; one-time prekey ids count up from 1.
func NewPrekeys(rand io.Reader, id *Identity, nOneTime int) (*Prekeys, error) {
	if id == nil {
		return nil, fmt.Errorf("%w: nil identity", ErrInvalidArgument)
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
	p.signature = ed25519.Sign(id.signing, signedPrekeyMessage(p.signedID, signed.pub))
	if err := p.AddOneTime(rand, nOneTime); err != nil {
		return nil, err
	}
	return p, nil
}

// AddOneTime generates n more one-time prekeys (replenishment). The total
// may not exceed MaxOneTimePrekeys. Ids are never reused.
func (p *Prekeys) AddOneTime(rand io.Reader, n int) error {
	if n < 0 || len(p.oneTime)+n > MaxOneTimePrekeys {
		return fmt.Errorf("%w: %d one-time prekeys (holding %d, at most %d)", ErrInvalidArgument, n, len(p.oneTime), MaxOneTimePrekeys)
	}
	if uint64(p.nextID)+uint64(n) > 1<<32-1 {
		return fmt.Errorf("%w: one-time prekey ids exhausted", ErrInvalidArgument)
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

// OneTimeCount returns how many one-time prekeys are left.
func (p *Prekeys) OneTimeCount() int { return len(p.oneTime) }

// SignedPrekeyID returns the id of the signed prekey.
func (p *Prekeys) SignedPrekeyID() uint32 { return p.signedID }

// Bundle returns the public bundle for the device at addr, offering every
// one-time prekey still held.
func (p *Prekeys) Bundle(addr ids.DeviceAddress) Bundle {
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

// MarshalBinary encodes the private prekey state: version byte (1), owner
// identity (64), signed prekey id (u32), signed prekey private key (32),
// signature (64), next one-time id (u32), count (u16), then per one-time
// prekey its id (u32) and private key (32). The output is secret.
func (p *Prekeys) MarshalBinary() ([]byte, error) {
	w := writer{b: make([]byte, 0, 1+64+4+32+64+4+2+len(p.oneTime)*36)}
	w.u8(prekeysVersion)
	w.identity(p.identity)
	w.u32(p.signedID)
	w.key(p.signed.priv)
	w.raw(p.signature)
	w.u32(p.nextID)
	w.u16(uint16(len(p.oneTime)))
	for _, o := range p.oneTime {
		w.u32(o.id)
		w.key(o.kp.priv)
	}
	return w.b, nil
}

// UnmarshalPrekeys decodes the output of Prekeys.MarshalBinary. Invalid
// input returns an error wrapping ErrMalformedState.
func UnmarshalPrekeys(b []byte) (*Prekeys, error) {
	p, err := unmarshalPrekeys(b)
	if err != nil {
		return nil, fmt.Errorf("%w: prekeys: %w", ErrMalformedState, err)
	}
	return p, nil
}

func unmarshalPrekeys(b []byte) (*Prekeys, error) {
	r := reader{b: b}
	if v := r.u8(); r.err == nil && v != prekeysVersion {
		return nil, fmt.Errorf("unknown version %d", v)
	}
	p := &Prekeys{identity: r.identity(), signedID: r.u32()}
	p.signed.priv = r.key()
	p.signature = slices.Clone(r.take(ed25519SignatureBytes))
	p.nextID = r.u32()
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
	if !ed25519.Verify(p.identity.SigningKey[:], signedPrekeyMessage(p.signedID, pub), p.signature) {
		return nil, fmt.Errorf("%w: stored signature", ErrBadSignature)
	}
	return p, nil
}
