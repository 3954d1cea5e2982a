package lock

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/agentlock/lock/internal/lease"
)

// resultName names the companion key P{K}:result.
const resultName = "result"

// A stored outcome is one byte saying what it is, the token of the hold
// that stored it and a newline, then fn's result or error text. The token
// makes the value unique to one hold, so that a resent store recognises its
// own (once_store.lua).
const (
	storedValue   = 'v'
	storedFailure = 'e'
)

// stored is what Redis keeps at P{K}:result.
type stored []byte

// encodeStored lays out what a hold with token stores.
func encodeStored(what byte, token string, data []byte) []byte {
	b := make([]byte, 0, 2+len(token)+len(data))
	b = append(b, what)
	b = append(b, token...)
	b = append(b, '\n')
	return append(b, data...)
}

// read returns what s says: a value, or the stored failure's error.
func (s stored) read(key string) ([]byte, bool, error) {
	i := bytes.IndexByte(s, '\n')
	if len(s) == 0 || i < 0 || (s[0] != storedValue && s[0] != storedFailure) {
		return nil, true, lease.NewOpError("lock", "once", key, fmt.Errorf("lock: stored result of %d bytes is not one Once wrote", len(s)))
	}
	data := s[i+1:]
	if s[0] == storedFailure {
		return nil, true, lease.NewOpError("lock", "once", key, ErrOnceFailed, errors.New(string(data)))
	}
	return nonNil(data), true, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
