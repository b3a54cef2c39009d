package component

import (
	"errors"
	"strings"
	"testing"
)

// minimal is a component with one empty core module, instantiated once,
// importing one instance and exporting another made of nothing.
func minimal() []byte {
	b := append([]byte(nil), componentPreamble...)
	section := func(id byte, content ...byte) {
		b = append(b, id)
		b = appendULEB(b, uint64(len(content)))
		b = append(b, content...)
	}
	section(1, modulePreamble...) // core module 0
	section(2, 1, 0x00, 0, 0)     // core instance 0: module 0, no args
	section(10, append(append([]byte{1, 0x00}, appendName(nil, "lockwarden:policy/clock@0.2.0")...), 0x05, 0)...)
	section(5, 1, 0x01, 0) // instance 1: no exports
	section(11, append(append([]byte{1, 0x00}, appendName(nil, "lockwarden:policy/policy@0.2.0")...), 0x05, 1, 0x00)...)
	return b
}

func TestReadPlansAMinimalComponent(t *testing.T) {
	plan, err := Read(minimal())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Instances) != 1 || strings.Join(plan.Imports, ",") != "lockwarden:policy/clock@0.2.0" {
		t.Errorf("plan %+v", plan)
	}
	if _, ok := plan.Exports["lockwarden:policy/policy@0.2.0"]; !ok {
		t.Errorf("exports %+v", plan.Exports)
	}
}

func TestReadRefusesWhatItDoesNotKnow(t *testing.T) {
	if _, err := Read(modulePreamble); !errors.Is(err, ErrNotComponent) {
		t.Errorf("a core module: %v", err)
	}
	for _, bad := range [][]byte{
		append(append([]byte(nil), componentPreamble...), 12, 0),               // a value section
		append(append([]byte(nil), componentPreamble...), 2, 5, 1, 0x00, 7, 0), // no module 7
		append(append([]byte(nil), componentPreamble...), 8, 3, 1, 0x09, 0),    // an unknown canon
	} {
		if _, err := Read(bad); err == nil {
			t.Errorf("%x accepted", bad)
		}
	}
}

// FuzzRead: no input makes Read panic; every truncation of a valid
// component is refused or planned, never crashes.
func FuzzRead(f *testing.F) {
	valid := minimal()
	for n := range valid {
		f.Add(valid[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Read(b)
	})
}
