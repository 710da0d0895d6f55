package main

import (
	"bytes"
	"debug/elf"
	"debug/pe"
	"encoding/binary"
	"os"
	"runtime"
	"strings"
	"testing"
)

// fakeELF is the smallest ELF executable header for machine, followed by
// payload: what release add reads the platform from.
func fakeELF(machine elf.Machine, osabi elf.OSABI, payload string) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(osabi), 0, 0, 0, 0, 0, 0, 0, 0})
	le := binary.LittleEndian
	_ = binary.Write(&b, le, struct {
		Type, Machine              uint16
		Version                    uint32
		Entry, Phoff, Shoff        uint64
		Flags                      uint32
		Ehsize, Phentsize, Phnum   uint16
		Shentsize, Shnum, Shstrndx uint16
	}{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: 1, Ehsize: 64, Phentsize: 56, Shentsize: 64})
	b.WriteString(payload)
	return b.Bytes()
}

// fakePE is the smallest PE executable header for machine, followed by
// payload.
func fakePE(machine uint16, payload string) []byte {
	b := make([]byte, 0x80) // the DOS header and stub
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	var buf bytes.Buffer
	buf.Write(b)
	buf.WriteString("PE\x00\x00")
	_ = binary.Write(&buf, binary.LittleEndian, pe.FileHeader{Machine: machine, Characteristics: 0x22})
	buf.WriteString(payload)
	return buf.Bytes()
}

// TestBinaryPlatform: release add reads GOOS and GOARCH from the binary's
// own headers, ELF, PE and Mach-O, and refuses what is none of them.
func TestBinaryPlatform(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if goos, goarch, err := binaryPlatform(f); err != nil || goos != runtime.GOOS || goarch != runtime.GOARCH {
		t.Errorf("this test binary: %s/%s, %v; want %s/%s", goos, goarch, err, runtime.GOOS, runtime.GOARCH)
	}
	for _, c := range []struct {
		name, want string
		b          []byte
	}{
		{"linux/amd64", "linux/amd64", fakeELF(elf.EM_X86_64, elf.ELFOSABI_NONE, "x")},
		{"linux/arm64", "linux/arm64", fakeELF(elf.EM_AARCH64, elf.ELFOSABI_NONE, "x")},
		{"freebsd/amd64", "freebsd/amd64", fakeELF(elf.EM_X86_64, elf.ELFOSABI_FREEBSD, "x")},
		{"windows/amd64", "windows/amd64", fakePE(pe.IMAGE_FILE_MACHINE_AMD64, "x")},
		{"windows/arm64", "windows/arm64", fakePE(pe.IMAGE_FILE_MACHINE_ARM64, "x")},
		{"sparc", "no Go architecture", fakeELF(elf.EM_SPARCV9, elf.ELFOSABI_NONE, "x")},
		{"text", "not an executable", []byte("#!/bin/sh\necho hello\n")},
	} {
		goos, goarch, err := binaryPlatform(bytes.NewReader(c.b))
		got := goos + "/" + goarch
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
