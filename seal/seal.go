// Package seal implements the one sealed-record format used for every
// sealed column of the client's local database.
//
// A sealed record is laid out as
//
//	offset  size  field
//	0       4     magic "KSMR"
//	4       1     format version (1)
//	5       1     record type (RecordType)
//	6       4     key id, big endian (KeyID of the storage key)
//	10      24    XChaCha20-Poly1305 nonce, random
//	34      n+16  ciphertext and Poly1305 tag
//
// The AEAD's associated data is the 10-byte header followed by the
// caller's associated data, which binds the row identity: AddressAD for a
// device's row, MessageAD for a message's (recipient or sender, and
// logical id), KeyVerifierAD for a storage key's verifier. A value copied
// to another row, another table or another record type therefore fails
// to open.
//
// Package seal never stores anything and never decides what is sealed; it
// defines the format, the record types and the associated data binding
// each to its row, and seals and opens bytes.
package seal

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/crypto/chacha20poly1305"
)

// Version is the sealed-record format version this package writes.
const Version = 1

// KeySize is the size of a storage key, in bytes.
const KeySize = chacha20poly1305.KeySize

const (
	magic      = "KSMR"
	headerSize = 4 + 1 + 1 + 4
	nonceSize  = chacha20poly1305.NonceSizeX
	// Overhead is the number of bytes a sealed record adds to its plaintext.
	Overhead = headerSize + nonceSize + chacha20poly1305.Overhead
)

// RecordType says what a sealed record holds. It is authenticated, so a
// record of one type never opens as another.
type RecordType uint8

// The record types of the client's database. Values are persisted: never
// renumber them.
const (
	RecordLocalIdentity     RecordType = 1
	RecordIdentityPin       RecordType = 2
	RecordSession           RecordType = 3
	RecordSessionInitiation RecordType = 4
	RecordPendingOutbound   RecordType = 5
	RecordPendingInbound    RecordType = 6
	RecordKeyVerifier       RecordType = 7
)

// KeyID identifies a storage key inside sealed records. It is derived from
// the key itself, so a record names the exact key that sealed it.
type KeyID uint32

// Key is a 32-byte storage key with its id. It never prints its bytes:
// every fmt verb, slog and the text and JSON encoders see a redacted
// value (see Format); Bytes is the one way to them. Compare keys by ID
// (or by their Bytes): == and reflect.DeepEqual tell only whether two
// Keys are copies of one value.
type Key struct {
	id KeyID
	// secret points to the key's KeySize bytes (a *[KeySize]byte), nil for
	// the zero Key only, whose secret is KeySize zero bytes. It is an
	// unsafe.Pointer because fmt, printing a struct that holds a Key in an
	// unexported field (where it cannot call Format), prints such a
	// pointer as an address under every verb, where it would print the
	// array a typed pointer points to.
	secret unsafe.Pointer
}

// raw returns the key's secret bytes.
func (k Key) raw() [KeySize]byte {
	if k.secret == nil {
		return [KeySize]byte{}
	}
	return *(*[KeySize]byte)(k.secret)
}

// NewKey returns the key holding secret (a copy of it). It returns an
// error wrapping ErrKey if secret is not KeySize bytes long or is all
// zero bytes: a key anyone can guess would seal nothing.
func NewKey(secret []byte) (Key, error) {
	var k Key
	if len(secret) != KeySize {
		return k, fmt.Errorf("%w: key is %d bytes, want %d", ErrKey, len(secret), KeySize)
	}
	if isZero(secret) {
		return k, fmt.Errorf("%w: key is %d zero bytes", ErrKey, KeySize)
	}
	b := new([KeySize]byte)
	copy(b[:], secret)
	k.secret = unsafe.Pointer(b)
	sum := sha256.Sum256(append([]byte("securemsg storage key id v1\x00"), secret...))
	k.id = KeyID(binary.BigEndian.Uint32(sum[:4]))
	return k, nil
}

// GenerateKey returns a new random key. The application keeps its bytes
// (Key.Bytes) in its keystore and rebuilds the key from them with NewKey.
func GenerateKey() (Key, error) {
	secret := make([]byte, KeySize)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, fmt.Errorf("seal: generate key: %w", err)
	}
	return NewKey(secret)
}

// ID returns the key's id.
func (k Key) ID() KeyID { return k.id }

// Bytes returns a copy of the key's KeySize secret bytes, for the
// application's keystore: NewKey of them returns the same key. Whoever
// holds them can open every record the key sealed. The zero Key returns
// KeySize zero bytes, which NewKey refuses.
func (k Key) Bytes() []byte {
	b := k.raw()
	return b[:]
}

// isZero reports whether b is all zero bytes, in time independent of
// where a non-zero byte is.
func isZero(b []byte) bool {
	var acc byte
	for _, x := range b {
		acc |= x
	}
	return subtle.ConstantTimeByteEq(acc, 0) == 1
}

// Keyring holds the current storage key, which seals, and any older keys
// still needed to open records during a rotation. A Keyring is safe for
// concurrent use. A nil *Keyring holds no key: Seal and Open return an
// error wrapping ErrKey. The zero Keyring holds none either until Add
// gives it one: Seal returns an error wrapping ErrKey, Open ErrWrongKey.
type Keyring struct {
	// mu guards current and keys: Add changes them while Seal and Open
	// read them on other goroutines.
	mu      sync.RWMutex
	current KeyID
	keys    map[KeyID]Key
}

// NewKeyring returns a keyring sealing with current and opening records
// sealed with current or any of older. It returns an error wrapping ErrKey
// if two keys share an id, or if a key is the zero Key (not made by
// NewKey or GenerateKey), which would seal with 32 zero bytes.
func NewKeyring(current Key, older ...Key) (*Keyring, error) {
	for i, k := range append([]Key{current}, older...) {
		if k.secret == nil {
			return nil, fmt.Errorf("%w: key %d of the keyring is the zero Key: make keys with NewKey or GenerateKey", ErrKey, i)
		}
	}
	kr := &Keyring{current: current.id, keys: map[KeyID]Key{current.id: current}}
	for _, k := range older {
		if _, dup := kr.keys[k.id]; dup {
			return nil, fmt.Errorf("%w: duplicate key id %d", ErrKey, k.id)
		}
		kr.keys[k.id] = k
	}
	return kr, nil
}

// errNilKeyring is what a nil *Keyring's Seal and Open return.
var errNilKeyring = fmt.Errorf("%w: nil keyring", ErrKey)

// errNoKey is what Seal of the zero Keyring returns.
var errNoKey = fmt.Errorf("%w: the keyring holds no key (make it with NewKeyring)", ErrKey)

// Current returns the id of the key that seals (0 for a nil keyring).
func (kr *Keyring) Current() KeyID {
	if kr == nil {
		return 0
	}
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return kr.current
}

// KeyIDs returns the ids of every key held, in ascending order (none for
// a nil keyring).
func (kr *Keyring) KeyIDs() []KeyID {
	if kr == nil {
		return nil
	}
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	out := make([]KeyID, 0, len(kr.keys))
	for id := range kr.keys {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Add makes k the sealing key while keeping the previous keys for opening
// (on the zero Keyring, k is its first key). Adding the current key again
// is a no-op. It returns an error wrapping ErrKey, and changes nothing, for
// the zero Key, a nil keyring, or a key whose id is held by another key
// (see CheckAdd).
func (kr *Keyring) Add(k Key) error {
	if kr == nil {
		return errNilKeyring
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if err := kr.checkAdd(k); err != nil {
		return err
	}
	if kr.keys == nil {
		kr.keys = map[KeyID]Key{}
	}
	kr.keys[k.id] = k
	kr.current = k.id
	return nil
}

// CheckAdd returns the error Add would return for k, changing nothing:
// one wrapping ErrKey for the zero Key, a nil keyring, or a key other than
// the one the keyring holds under k's id. Records name their key by its
// 32-bit id alone, so two different keys with one id (a chance of 2^-32
// per pair) cannot be held together: the second would replace the first,
// and every record the first sealed would fail with ErrAuthentication. A
// caller that must know before it records anything (a key rotation) asks
// first; make another key with GenerateKey.
func (kr *Keyring) CheckAdd(k Key) error {
	if kr == nil {
		return errNilKeyring
	}
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return kr.checkAdd(k)
}

// checkAdd is CheckAdd, kr.mu held.
func (kr *Keyring) checkAdd(k Key) error {
	if k.secret == nil {
		return fmt.Errorf("%w: the zero Key: make keys with NewKey or GenerateKey", ErrKey)
	}
	if held, ok := kr.keys[k.id]; ok {
		a, b := held.raw(), k.raw()
		if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
			return fmt.Errorf("%w: another key with id %d is held: generate another key", ErrKey, k.id)
		}
	}
	return nil
}

// Forget drops the key with id, after a rotation has re-sealed every record
// it sealed. The current key cannot be forgotten: it returns an error
// wrapping ErrKey, as does a nil keyring.
func (kr *Keyring) Forget(id KeyID) error {
	if kr == nil {
		return errNilKeyring
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if id == kr.current {
		return fmt.Errorf("%w: cannot forget the current key %d", ErrKey, id)
	}
	delete(kr.keys, id)
	return nil
}

// Seal seals plaintext as a record of type rt bound to ad, with the current
// key and a fresh random nonce. It returns an error wrapping ErrKey for a
// keyring holding no key (nil, or the zero Keyring), which has no key to
// seal with.
func (kr *Keyring) Seal(rt RecordType, ad, plaintext []byte) ([]byte, error) {
	if kr == nil {
		return nil, errNilKeyring
	}
	kr.mu.RLock()
	k := kr.keys[kr.current]
	kr.mu.RUnlock()
	if k.secret == nil {
		// The zero Keyring: its zero Key would seal with 32 zero bytes,
		// which anyone can open.
		return nil, errNoKey
	}
	secret := k.raw()
	aead, err := chacha20poly1305.NewX(secret[:])
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	out := make([]byte, headerSize+nonceSize, Overhead+len(plaintext))
	copy(out, magic)
	out[4] = Version
	out[5] = byte(rt)
	binary.BigEndian.PutUint32(out[6:10], uint32(k.id))
	if _, err := rand.Read(out[headerSize:]); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return aead.Seal(out, out[headerSize:], plaintext, associatedData(out[:headerSize], ad)), nil
}

// Header is the clear part of a sealed record.
type Header struct {
	Version    uint8
	RecordType RecordType
	KeyID      KeyID
}

// Parse checks the framing of a sealed record without opening it and
// returns its header. It returns an error wrapping ErrTruncated,
// ErrMalformed or ErrUnknownVersion.
func Parse(sealed []byte) (Header, error) {
	switch {
	case len(sealed) < len(magic) && string(sealed) == magic[:len(sealed)]:
		return Header{}, fmt.Errorf("%w: %d bytes", ErrTruncated, len(sealed))
	case len(sealed) < len(magic) || string(sealed[:len(magic)]) != magic:
		return Header{}, ErrMalformed
	case len(sealed) < headerSize:
		return Header{}, fmt.Errorf("%w: %d bytes", ErrTruncated, len(sealed))
	}
	h := Header{Version: sealed[4], RecordType: RecordType(sealed[5]), KeyID: KeyID(binary.BigEndian.Uint32(sealed[6:10]))}
	if h.Version != Version {
		return h, fmt.Errorf("%w: %d", ErrUnknownVersion, h.Version)
	}
	if len(sealed) < Overhead {
		return h, fmt.Errorf("%w: %d bytes, want at least %d", ErrTruncated, len(sealed), Overhead)
	}
	return h, nil
}

// Open checks and opens a record of type rt bound to ad. It returns an
// error wrapping ErrTruncated, ErrMalformed, ErrUnknownVersion,
// ErrRecordType, ErrWrongKey or ErrAuthentication, and never returns
// plaintext together with an error.
func (kr *Keyring) Open(rt RecordType, ad, sealed []byte) ([]byte, error) {
	if kr == nil {
		return nil, errNilKeyring
	}
	h, err := Parse(sealed)
	if err != nil {
		return nil, err
	}
	if h.RecordType != rt {
		return nil, fmt.Errorf("%w: record type %d, want %d", ErrRecordType, h.RecordType, rt)
	}
	kr.mu.RLock()
	k, ok := kr.keys[h.KeyID]
	kr.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: key id %d", ErrWrongKey, h.KeyID)
	}
	secret := k.raw()
	aead, err := chacha20poly1305.NewX(secret[:])
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	pt, err := aead.Open(nil, sealed[headerSize:headerSize+nonceSize], sealed[headerSize+nonceSize:], associatedData(sealed[:headerSize], ad))
	if err != nil {
		return nil, ErrAuthentication
	}
	return pt, nil
}

func associatedData(header, ad []byte) []byte {
	out := make([]byte, 0, len(header)+len(ad))
	return append(append(out, header...), ad...)
}

// AddressAD is the associated data binding a value sealed as
// RecordLocalIdentity, RecordIdentityPin, RecordSession or
// RecordSessionInitiation to its device's row: the device's user id and
// device id.
func AddressAD(userID string, deviceID int64) []byte {
	return ad([]byte(userID), binary.BigEndian.AppendUint64(nil, uint64(deviceID)))
}

// MessageAD is the associated data binding a value sealed as
// RecordPendingOutbound or RecordPendingInbound to its row: the remote
// device (recipient or sender) and the message's logical id.
func MessageAD(userID string, deviceID int64, logicalID [16]byte) []byte {
	return ad([]byte(userID), binary.BigEndian.AppendUint64(nil, uint64(deviceID)), logicalID[:])
}

// KeyVerifierAD is the associated data binding a value sealed as
// RecordKeyVerifier to its storage_key row: the key id.
func KeyVerifierAD(id KeyID) []byte {
	return ad([]byte("storage_key"), []byte(fmt.Sprint(id)))
}

// ad builds associated data from parts, each prefixed with its length, so
// that no two different lists of parts give the same bytes.
func ad(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += 4 + len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = binary.BigEndian.AppendUint32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out
}
