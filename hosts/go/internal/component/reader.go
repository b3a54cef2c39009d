package component

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// errShort is what every read past the end of its bytes returns.
var errShort = errors.New("unexpected end of the binary")

// reader reads the binary format's primitives from a byte slice, never past
// its end.
type reader struct {
	data []byte
	pos  int
}

func (r *reader) done() bool { return r.pos >= len(r.data) }

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.data) {
		return 0, errShort
	}
	b := r.data[r.pos]
	r.pos++
	return b, nil
}

// bytes returns the next n bytes, shared with the input.
func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.data)-r.pos) {
		return nil, errShort
	}
	b := r.data[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

// uleb reads an unsigned LEB128 number of at most bits bits.
func (r *reader) uleb(bits uint) (uint64, error) {
	var value uint64
	for shift := uint(0); ; shift += 7 {
		b, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits || (shift+7 > bits && uint64(b&0x7f)>>(bits-shift) != 0) {
			return 0, errors.New("LEB128 number too large")
		}
		value |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return value, nil
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

// name reads a length-prefixed UTF-8 string.
func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("name is not UTF-8")
	}
	return string(b), nil
}

// externName reads an import or export name: a discriminant (0x00 plain,
// 0x01 with a version suffix, which is read and dropped) and the name.
func (r *reader) externName() (string, error) {
	tag, err := r.byte()
	if err != nil {
		return "", err
	}
	name, err := r.name()
	if err != nil {
		return "", err
	}
	switch tag {
	case 0x00:
	case 0x01:
		if _, err := r.name(); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("unknown name form 0x%02x", tag)
	}
	return name, nil
}
