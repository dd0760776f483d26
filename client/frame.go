package client

import (
	"fmt"

	"github.com/securemsg/storage/store"
)

// The plaintext inside every envelope is a frame:
//
//	offset  size  field
//	0       1     frame version (1)
//	1       1     frame type: 1 MESSAGE, 2 ACK
//	2       16    logical message id
//	18      n     MESSAGE: the application's plaintext; ACK: nothing
//
// These are the only two frame types: abandon adds none (no CANCEL,
// RECALL, NACK or ABANDON).
const (
	frameVersion    = 1
	frameMessage    = 1
	frameAck        = 2
	frameHeaderSize = 2 + store.LogicalMessageIDLen
)

func encodeFrame(kind byte, id store.LogicalMessageID, body []byte) []byte {
	out := make([]byte, 0, frameHeaderSize+len(body))
	out = append(out, frameVersion, kind)
	out = append(out, id[:]...)
	return append(out, body...)
}

func decodeFrame(b []byte) (kind byte, id store.LogicalMessageID, body []byte, err error) {
	if len(b) < frameHeaderSize {
		return 0, id, nil, fmt.Errorf("%w: %d bytes", ErrMalformedFrame, len(b))
	}
	if b[0] != frameVersion {
		return 0, id, nil, fmt.Errorf("%w: version %d", ErrMalformedFrame, b[0])
	}
	kind = b[1]
	copy(id[:], b[2:frameHeaderSize])
	switch {
	case kind == frameMessage:
		return kind, id, b[frameHeaderSize:], nil
	case kind == frameAck && len(b) == frameHeaderSize:
		return kind, id, nil, nil
	}
	return 0, id, nil, fmt.Errorf("%w: type %d, %d bytes", ErrMalformedFrame, kind, len(b))
}

// isAck reports whether frame, as encodeFrame made it, is an ACK.
func isAck(frame []byte) bool { return len(frame) > 1 && frame[1] == frameAck }
