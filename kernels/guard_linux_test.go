//go:build linux

package kernels

import (
	"syscall"
	"testing"
	"unsafe"
)

// guardedPage returns a page of memory followed by an inaccessible page, so
// that any read past the end of a slice ending at the page's end faults.
func guardedPage(t *testing.T) []byte {
	t.Helper()
	ps := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[ps:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	return mem[:ps]
}

// TestTailsStayInBounds runs every kernel on vectors that end at an
// inaccessible page: the masked tail loads must not touch it.
func TestTailsStayInBounds(t *testing.T) {
	page := guardedPage(t)
	floats := unsafe.Slice((*float32)(unsafe.Pointer(&page[0])), len(page)/4)
	int8s := unsafe.Slice((*int8)(unsafe.Pointer(&page[0])), len(page))
	t.Run("f32", func(t *testing.T) {
		forEachImpl(t, f32Family, func(t *testing.T) {
			for n := 1; n <= 80; n++ {
				a := floats[len(floats)-n:]
				_ = Dot(a, a) + L2Sq(a, a)
				out := make([]float32, 1)
				DotBlock(a, a, out)
			}
		})
	})
	t.Run("int8", func(t *testing.T) {
		forEachImpl(t, intFamily, func(t *testing.T) {
			for n := 1; n <= 140; n++ {
				_ = DotU8I8(page[len(page)-n:], int8s[len(page)-n:])
				_ = dotU4I8(page[len(page)-n:], int8s[len(page)-2*n:])
				_ = dotU2I8(page[len(page)-n:], int8s[len(page)-4*n:])
			}
		})
	})
}
