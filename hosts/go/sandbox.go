package lockwarden

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryCap allocates an evaluation's linear memories and refuses to grow
// any over limit bytes, remembering the largest size refused, so that a
// policy stopped for want of memory is told apart from one that crashed.
type memoryCap struct {
	limit uint64
	mu    sync.Mutex
	asked uint64
}

// Allocate implements experimental.MemoryAllocator.
func (c *memoryCap) Allocate(capacity, _ uint64) experimental.LinearMemory {
	return &cappedMemory{owner: c, buf: make([]byte, 0, min(capacity, c.limit))}
}

// refused is the largest size refused, 0 if none.
func (c *memoryCap) refused() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked
}

// cappedMemory is one linear memory under a memoryCap.
type cappedMemory struct {
	owner *memoryCap
	buf   []byte
}

// Reallocate implements experimental.LinearMemory: nil (the policy's
// memory.grow fails) over the cap.
func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.owner.limit {
		m.owner.mu.Lock()
		m.owner.asked = max(m.owner.asked, size)
		m.owner.mu.Unlock()
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.owner.limit))
	copy(grown, m.buf)
	m.buf = grown
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *cappedMemory) Free() { m.buf = nil }
