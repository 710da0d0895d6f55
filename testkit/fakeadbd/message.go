package fakeadbd

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Transport commands.
const (
	CmdSYNC = 0x434e5953
	CmdCNXN = 0x4e584e43
	CmdAUTH = 0x48545541
	CmdOPEN = 0x4e45504f
	CmdOKAY = 0x59414b4f
	CmdCLSE = 0x45534c43
	CmdWRTE = 0x45545257
	CmdSTLS = 0x534c5453
)

// AUTH packet types (arg0).
const (
	AuthToken        = 1
	AuthSignature    = 2
	AuthRSAPublicKey = 3
)

// Protocol versions: VersionSkipChecksum lets both sides send a zero data
// checksum.
const (
	VersionMin          = 0x01000000
	VersionSkipChecksum = 0x01000001
)

// HeaderSize is the size of a transport message header.
const HeaderSize = 24

// Message is one transport message.
type Message struct {
	Command    uint32
	Arg0, Arg1 uint32
	Data       []byte
}

func commandName(c uint32) string {
	switch c {
	case CmdSYNC, CmdCNXN, CmdAUTH, CmdOPEN, CmdOKAY, CmdCLSE, CmdWRTE, CmdSTLS:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], c)
		return string(b[:])
	}
	return fmt.Sprintf("0x%08x", c)
}

func (m Message) String() string {
	return fmt.Sprintf("%s(%d, %d, %d bytes)", commandName(m.Command), m.Arg0, m.Arg1, len(m.Data))
}

// Checksum is the sum of the data's bytes, the data_check of protocol
// versions before VersionSkipChecksum.
func Checksum(data []byte) uint32 {
	var s uint32
	for _, b := range data {
		s += uint32(b)
	}
	return s
}

// AppendMessage appends m, header and data, to b. The checksum is always
// computed: peers of every version accept it.
func AppendMessage(b []byte, m Message) []byte {
	return append(AppendHeader(b, m, true), m.Data...)
}

// AppendHeader appends m's 24-byte header to b, with the data checksum or
// zero in its place.
func AppendHeader(b []byte, m Message, checksum bool) []byte {
	var sum uint32
	if checksum {
		sum = Checksum(m.Data)
	}
	b = binary.LittleEndian.AppendUint32(b, m.Command)
	b = binary.LittleEndian.AppendUint32(b, m.Arg0)
	b = binary.LittleEndian.AppendUint32(b, m.Arg1)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Data)))
	b = binary.LittleEndian.AppendUint32(b, sum)
	return binary.LittleEndian.AppendUint32(b, m.Command^0xffffffff)
}

// ParseHeader checks a 24-byte header and returns the message it starts
// (without data) and the data length it announces.
func ParseHeader(h []byte, maxData uint32) (Message, uint32, uint32, error) {
	if len(h) != HeaderSize {
		return Message{}, 0, 0, fmt.Errorf("parse message header: %d bytes, want %d", len(h), HeaderSize)
	}
	m := Message{
		Command: binary.LittleEndian.Uint32(h[0:]),
		Arg0:    binary.LittleEndian.Uint32(h[4:]),
		Arg1:    binary.LittleEndian.Uint32(h[8:]),
	}
	n := binary.LittleEndian.Uint32(h[12:])
	check := binary.LittleEndian.Uint32(h[16:])
	magic := binary.LittleEndian.Uint32(h[20:])
	if magic != m.Command^0xffffffff {
		return Message{}, 0, 0, fmt.Errorf("parse message header: magic 0x%08x does not match command %s", magic, commandName(m.Command))
	}
	switch m.Command {
	case CmdSYNC, CmdCNXN, CmdAUTH, CmdOPEN, CmdOKAY, CmdCLSE, CmdWRTE, CmdSTLS:
	default:
		return Message{}, 0, 0, fmt.Errorf("parse message header: unknown command %s", commandName(m.Command))
	}
	if n > maxData {
		return Message{}, 0, 0, fmt.Errorf("parse message header: %s announces %d data bytes, limit %d", commandName(m.Command), n, maxData)
	}
	return m, n, check, nil
}

// ReadMessage reads one message. A nonzero checksum must match the data.
func ReadMessage(r io.Reader, maxData uint32) (Message, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Message{}, err
	}
	m, n, check, err := ParseHeader(h[:], maxData)
	if err != nil {
		return Message{}, err
	}
	if n > 0 {
		m.Data = make([]byte, n)
		if _, err := io.ReadFull(r, m.Data); err != nil {
			return Message{}, fmt.Errorf("read %s data: %w", commandName(m.Command), err)
		}
	}
	if check != 0 && check != Checksum(m.Data) {
		return Message{}, fmt.Errorf("read %s: data checksum 0x%08x, computed 0x%08x", commandName(m.Command), check, Checksum(m.Data))
	}
	return m, nil
}
