package toolapi

import (
	"time"
	"unicode/utf8"
)

// decodeCallBodyFast decodes the body every agent sends — only the known
// fields, each at most once and spelled exactly, arguments {} or null,
// strings without escapes or control characters, wait_ms a plain
// non-negative integer — into exactly the CallRequest decodeCallBody makes
// of it, without encoding/json's allocations. ok is false for anything
// else (including every body that is an error), which decodeCallBody then
// decodes as always; TestDecodeCallBodyFast_AgreesWithDecoder holds the
// two equal.
func decodeCallBodyFast(data []byte) (req CallRequest, ok bool) {
	p := jsonScan{b: data}
	p.space()
	if !p.eat('{') {
		return req, false
	}
	var seen [4]bool
	p.space()
	if !p.eat('}') {
		for {
			p.space()
			key, ok := p.plainString()
			if !ok {
				return req, false
			}
			p.space()
			if !p.eat(':') {
				return req, false
			}
			p.space()
			var field int
			switch string(key) {
			case "arguments":
				field = 0
				if !p.emptyObjectOrNull() {
					return req, false
				}
			case "session_id", "idempotency_key":
				field = 1
				if string(key) == "idempotency_key" {
					field = 2
				}
				v, ok := p.plainString()
				if !ok || len(v) > maxIDLen {
					return req, false
				}
				if field == 1 {
					req.SessionID = string(v)
				} else {
					req.IdempotencyKey = string(v)
				}
			case "wait_ms":
				field = 3
				ms, ok := p.smallUint()
				if !ok {
					return req, false
				}
				req.Wait = time.Duration(ms) * time.Millisecond
			default:
				return req, false
			}
			if seen[field] {
				return req, false
			}
			seen[field] = true
			p.space()
			if p.eat(',') {
				continue
			}
			if p.eat('}') {
				break
			}
			return req, false
		}
	}
	p.space()
	if p.i != len(p.b) {
		return req, false
	}
	req.Arguments = map[string]any{}
	return req, true
}

// jsonScan reads a few JSON forms from b at i.
type jsonScan struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (p *jsonScan) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScan) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plainString reads a string without escapes or control characters, of
// valid UTF-8, and returns its bytes: what it decodes to.
func (p *jsonScan) plainString() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			v := p.b[start:p.i]
			p.i++
			return v, utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// emptyObjectOrNull reads {} (with whitespace inside) or null.
func (p *jsonScan) emptyObjectOrNull() bool {
	if p.eat('{') {
		p.space()
		return p.eat('}')
	}
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// smallUint reads 0 or an integer of up to 15 digits without a leading
// zero, sign, fraction or exponent.
func (p *jsonScan) smallUint() (int64, bool) {
	start := p.i
	var v int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 15 || (n > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}
