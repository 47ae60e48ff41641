package cql2

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of what the parsers read: a longer filter, or one nested deeper
// (parentheses, NOT, JSON operators), is an *Error, so that hostile input
// costs bounded time and stack.
const (
	MaxLength = 64 << 10 // bytes
	MaxDepth  = 64
)

// The encodings, as the filter-lang parameter of OGC API Features Part 3
// names them.
const (
	LangText = "cql2-text"
	LangJSON = "cql2-json"
)

// Parse parses src in the encoding lang (LangText or LangJSON).
func Parse(lang, src string) (Expr, error) {
	switch lang {
	case LangText:
		return ParseText(src)
	case LangJSON:
		return ParseJSON([]byte(src))
	}
	return nil, errorf("unknown filter language %q (cql2-text or cql2-json)", truncate(lang))
}

// ParseText parses a cql2-text filter (OGC 21-065r2 §8, the comparison
// subset: see the package documentation for what is read).
func ParseText(src string) (Expr, error) {
	if len(src) > MaxLength {
		return nil, errorf("filter is %d bytes long; the most accepted is %d", len(src), MaxLength)
	}
	if !utf8.ValidString(src) {
		off := 0
		for off < len(src) {
			r, n := utf8.DecodeRuneInString(src[off:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			off += n
		}
		return nil, &Error{Msg: fmt.Sprintf("invalid UTF-8 at position %d", charPos(src, off)), Pos: charPos(src, off)}
	}
	p := &parser{src: src}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, &Error{Msg: "empty filter", Pos: 0}
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.expected("AND, OR or the end of the filter")
	}
	return e, nil
}

type tokKind uint8

const (
	tEOF     tokKind = iota
	tIdent           // a property name, bare or double-quoted
	tKeyword         // AND, OR, …: tok.text is its upper-case spelling
	tNumber
	tString
	tOp // a comparison operator
	tLParen
	tRParen
	tComma
)

type token struct {
	kind     tokKind
	pos, end int    // byte offsets in src
	text     string // keyword (upper case); decoded name or string
	op       CompareOp
	num      NumberLit
	quoted   bool // a double-quoted name
}

type parser struct {
	src   string
	off   int // next byte to lex
	tok   token
	depth int
}

// errAt is a syntax error at byte offset off.
func (p *parser) errAt(off int, format string, args ...any) *Error {
	pos := charPos(p.src, off)
	return &Error{Msg: fmt.Sprintf(format, args...), Pos: pos}
}

// expected is the error of a token that is not what the grammar needs.
func (p *parser) expected(what string) *Error {
	return p.errAt(p.tok.pos, "expected %s at position %d (%s)", what, charPos(p.src, p.tok.pos), p.found())
}

// found describes the current token as the user wrote it.
func (p *parser) found() string {
	if p.tok.kind == tEOF {
		return "end of input"
	}
	return "found " + truncate(p.src[p.tok.pos:p.tok.end])
}

// truncate shortens s for a message.
func truncate(s string) string {
	const most = 40
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	n := 0
	for i := range s {
		if n == most {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// next lexes the next token into p.tok.
func (p *parser) next() error {
	src := p.src
	for p.off < len(src) {
		r, n := utf8.DecodeRuneInString(src[p.off:])
		if !unicode.IsSpace(r) {
			break
		}
		p.off += n
	}
	start := p.off
	p.tok = token{pos: start, end: start}
	if start == len(src) {
		p.tok.kind = tEOF
		return nil
	}
	c := src[start]
	switch {
	case c == '(':
		p.tok.kind, p.off = tLParen, start+1
	case c == ')':
		p.tok.kind, p.off = tRParen, start+1
	case c == ',':
		p.tok.kind, p.off = tComma, start+1
	case c == '=':
		p.tok.kind, p.tok.op, p.off = tOp, Eq, start+1
	case c == '<':
		p.tok.kind, p.tok.op, p.off = tOp, Lt, start+1
		if start+1 < len(src) && src[start+1] == '=' {
			p.tok.op, p.off = Le, start+2
		} else if start+1 < len(src) && src[start+1] == '>' {
			p.tok.op, p.off = Ne, start+2
		}
	case c == '>':
		p.tok.kind, p.tok.op, p.off = tOp, Gt, start+1
		if start+1 < len(src) && src[start+1] == '=' {
			p.tok.op, p.off = Ge, start+2
		}
	case c == '\'':
		return p.lexString()
	case c == '"':
		return p.lexQuotedName()
	case '0' <= c && c <= '9' || c == '.' || c == '+' || c == '-':
		return p.lexNumber()
	default:
		r, n := utf8.DecodeRuneInString(src[start:])
		if !identStart(r) {
			return p.errAt(start, "unexpected character %q at position %d", r, charPos(src, start))
		}
		p.off = start + n
		for p.off < len(src) {
			r, n := utf8.DecodeRuneInString(src[p.off:])
			if !identPart(r) {
				break
			}
			p.off += n
		}
		word := src[start:p.off]
		if k := keyword(word); k != "" {
			p.tok.kind, p.tok.text, p.tok.end = tKeyword, k, p.off
			return nil
		}
		p.tok.kind, p.tok.text = tIdent, word
		if p.off < len(src) && src[p.off] == '[' {
			// A channel of a multi-channel attribute: name[i].
			i := p.off + 1
			for i < len(src) && '0' <= src[i] && src[i] <= '9' {
				i++
			}
			if i == p.off+1 || i == len(src) || src[i] != ']' {
				return p.errAt(p.off, "expected a channel number and ']' after %q at position %d", word, charPos(src, p.off))
			}
			p.off = i + 1
			p.tok.text = src[start:p.off]
		}
	}
	p.tok.end = p.off
	return nil
}

// lexString reads a single-quoted string, a quote inside written twice. A
// backslash is an ordinary character here (LIKE gives it its meaning), so
// every string can be written.
func (p *parser) lexString() error {
	text, err := p.lexQuoted('\'', "string")
	if err != nil {
		return err
	}
	p.tok.kind, p.tok.text, p.tok.end = tString, text, p.off
	return nil
}

// lexQuotedName reads "…" with "" for a double quote.
func (p *parser) lexQuotedName() error {
	start := p.off
	text, err := p.lexQuoted('"', "property name")
	if err != nil {
		return err
	}
	if text == "" {
		return p.errAt(start, "empty property name at position %d", charPos(p.src, start))
	}
	p.tok.kind, p.tok.text, p.tok.end, p.tok.quoted = tIdent, text, p.off, true
	return nil
}

// lexQuoted reads the text between quote characters q from p.off, a quote
// inside written twice, and moves p.off past the closing quote; what names
// the token in the error when it is not closed.
func (p *parser) lexQuoted(q byte, what string) (string, error) {
	src, start := p.src, p.off
	var b strings.Builder
	i := start + 1
	for {
		j := strings.IndexByte(src[i:], q)
		if j < 0 {
			return "", p.errAt(start, "unterminated %s starting at position %d", what, charPos(src, start))
		}
		b.WriteString(src[i : i+j])
		i += j + 1
		if i < len(src) && src[i] == q {
			b.WriteByte(q)
			i++
			continue
		}
		break
	}
	p.off = i
	return b.String(), nil
}

// lexNumber reads [sign] digits [. [digits]] | [sign] . digits, then an
// optional exponent e [sign] digits.
func (p *parser) lexNumber() error {
	src, start := p.src, p.off
	i := start
	if src[i] == '+' || src[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		return i - j
	}
	n := digits()
	if i < len(src) && src[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		if i == start+1 && (src[start] == '+' || src[start] == '-') {
			return p.errAt(start, "unexpected %q at position %d (arithmetic is not supported)", src[start], charPos(src, start))
		}
		return p.errAt(start, "malformed number %q at position %d", truncate(src[start:p.wordEnd(i)]), charPos(src, start))
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if digits() == 0 {
			return p.errAt(start, "malformed number %q at position %d", truncate(src[start:p.wordEnd(i)]), charPos(src, start))
		}
	}
	if i < len(src) {
		if r, _ := utf8.DecodeRuneInString(src[i:]); identPart(r) {
			return p.errAt(start, "malformed number %q at position %d", truncate(src[start:p.wordEnd(i)]), charPos(src, start))
		}
	}
	num, err := parseNumber(src[start:i])
	if err != "" {
		return p.errAt(start, "number %s at position %d %s", truncate(src[start:i]), charPos(src, start), err)
	}
	p.off = i
	p.tok.kind, p.tok.num, p.tok.end = tNumber, num, i
	return nil
}

// wordEnd is where the run of identifier characters from i ends (to show
// the whole of a malformed number).
func (p *parser) wordEnd(i int) int {
	for i < len(p.src) {
		r, n := utf8.DecodeRuneInString(p.src[i:])
		if !identPart(r) && r != '+' && r != '-' {
			break
		}
		i += n
	}
	return i
}

// parseNumber reads a well-formed numeric literal (the lexer or JSON
// checked its syntax); the problem, if any, is returned as words.
func parseNumber(s string) (NumberLit, string) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return NumberLit{}, "is out of range"
	}
	n := NumberLit{Float: f}
	if !strings.ContainsAny(s, ".eE") {
		digits := strings.TrimLeft(s, "+-")
		if mag, err := strconv.ParseUint(digits, 10, 64); err == nil {
			n.Int, n.Mag, n.Neg = true, mag, s[0] == '-' && mag != 0
		}
	}
	if n.Float == 0 {
		n.Float = 0 // no negative zero: -0 and 0 are one literal
	}
	return n, ""
}

// The grammar, lowest precedence first:
//
//	or      = and {OR and}
//	and     = not {AND not}
//	not     = NOT not | primary
//	primary = "(" or ")" | TRUE | FALSE | predicate
func (p *parser) parseOr() (Expr, error) {
	return p.parseList("OR", p.parseAnd, func(args []Expr) Expr { return &Or{Args: args} })
}

func (p *parser) parseAnd() (Expr, error) {
	return p.parseList("AND", p.parseNot, func(args []Expr) Expr { return &And{Args: args} })
}

// parseList parses operands joined by keyword kw, each with operand, into
// list (the operand itself when there is one).
func (p *parser) parseList(kw string, operand func() (Expr, error), list func([]Expr) Expr) (Expr, error) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	if !p.isKeyword(kw) {
		return first, nil
	}
	args := []Expr{first}
	for p.isKeyword(kw) {
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := operand()
		if err != nil {
			return nil, err
		}
		args = append(args, e)
	}
	return list(args), nil
}

func (p *parser) isKeyword(k string) bool { return p.tok.kind == tKeyword && p.tok.text == k }

// enter counts one level of nesting and moves past the token that opens
// it (NOT or '(').
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(p.tok.pos, "filter nested deeper than %d at position %d", MaxDepth, charPos(p.src, p.tok.pos))
	}
	return p.next()
}

func (p *parser) parseNot() (Expr, error) {
	if !p.isKeyword("NOT") {
		return p.parsePrimary()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	e, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	p.depth--
	return &Not{Arg: e}, nil
}

func (p *parser) parsePrimary() (Expr, error) {
	if p.tok.kind == tLParen {
		if err := p.enter(); err != nil {
			return nil, err
		}
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.expected("')'")
		}
		p.depth--
		return e, p.next()
	}
	left, err := p.parseScalar()
	if err != nil {
		return nil, err
	}
	if b, ok := left.(BoolLit); ok && !p.startsPredicate() {
		return b, nil
	}
	return p.parsePredicate(left)
}

// startsPredicate reports whether the current token continues an operand
// into a predicate.
func (p *parser) startsPredicate() bool {
	if p.tok.kind == tOp {
		return true
	}
	if p.tok.kind == tKeyword {
		switch p.tok.text {
		case "NOT", "LIKE", "BETWEEN", "IN", "IS":
			return true
		}
	}
	return false
}

// parseScalar reads an operand: a property, a number, a string, TRUE or
// FALSE.
func (p *parser) parseScalar() (Scalar, error) {
	var s Scalar
	switch p.tok.kind {
	case tIdent:
		if !p.tok.quoted && p.off < len(p.src) && p.peekParen() {
			return nil, p.errAt(p.tok.pos, "function %s at position %d is not supported", truncate(p.tok.text), charPos(p.src, p.tok.pos))
		}
		s = Property{Name: p.tok.text}
	case tNumber:
		s = p.tok.num
	case tString:
		s = StringLit{Value: p.tok.text}
	case tKeyword:
		switch p.tok.text {
		case "TRUE":
			s = BoolLit{Value: true}
		case "FALSE":
			s = BoolLit{Value: false}
		}
	}
	if s == nil {
		return nil, p.expected("a property or a literal")
	}
	return s, p.next()
}

// peekParen reports whether the next non-space character is '(' (a
// function call, which this package does not evaluate).
func (p *parser) peekParen() bool {
	for i := p.off; i < len(p.src); {
		r, n := utf8.DecodeRuneInString(p.src[i:])
		if !unicode.IsSpace(r) {
			return r == '('
		}
		i += n
	}
	return false
}

func (p *parser) parsePredicate(left Scalar) (Expr, error) {
	if p.tok.kind == tOp {
		op := p.tok.op
		if err := p.next(); err != nil {
			return nil, err
		}
		right, err := p.parseScalar()
		if err != nil {
			return nil, err
		}
		return &Compare{Op: op, Left: left, Right: right}, nil
	}
	if p.tok.kind != tKeyword {
		return nil, p.expected(fmt.Sprintf("an operator after %s", truncate(left.String())))
	}
	switch p.tok.text {
	case "IS":
		if err := p.next(); err != nil {
			return nil, err
		}
		not := p.isKeyword("NOT")
		if not {
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		if !p.isKeyword("NULL") {
			return nil, p.expected("NULL")
		}
		var e Expr = &IsNull{Value: left}
		if not {
			e = &Not{Arg: e}
		}
		return e, p.next()
	case "NOT":
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind != tKeyword || (p.tok.text != "LIKE" && p.tok.text != "BETWEEN" && p.tok.text != "IN") {
			return nil, p.expected("LIKE, BETWEEN or IN after NOT")
		}
		e, err := p.parseKeywordPredicate(left)
		if err != nil {
			return nil, err
		}
		return &Not{Arg: e}, nil
	case "LIKE", "BETWEEN", "IN":
		return p.parseKeywordPredicate(left)
	}
	return nil, p.expected(fmt.Sprintf("an operator after %s", truncate(left.String())))
}

// parseKeywordPredicate reads LIKE, BETWEEN or IN and what follows.
func (p *parser) parseKeywordPredicate(left Scalar) (Expr, error) {
	kw := p.tok.text
	if err := p.next(); err != nil {
		return nil, err
	}
	switch kw {
	case "LIKE":
		if p.tok.kind != tString {
			return nil, p.expected("a string pattern after LIKE")
		}
		pat, pos := p.tok.text, p.tok.pos
		if err := checkPattern(pat); err != "" {
			return nil, p.errAt(pos, "LIKE pattern %s at position %d %s", truncate(p.src[pos:p.tok.end]), charPos(p.src, pos), err)
		}
		return &Like{Value: left, Pattern: pat}, p.next()
	case "BETWEEN":
		lo, err := p.parseScalar()
		if err != nil {
			return nil, err
		}
		if !p.isKeyword("AND") {
			return nil, p.expected("AND")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		hi, err := p.parseScalar()
		if err != nil {
			return nil, err
		}
		return &Between{Value: left, Low: lo, High: hi}, nil
	default: // IN
		if p.tok.kind != tLParen {
			return nil, p.expected("'(' after IN")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		var list []Scalar
		for {
			v, err := p.parseScalar()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			if p.tok.kind == tRParen {
				break
			}
			if p.tok.kind != tComma {
				return nil, p.expected("',' or ')'")
			}
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		return &In{Value: left, List: list}, p.next()
	}
}

// checkPattern is what is wrong with a LIKE pattern, in words, or "": a
// backslash must escape a character.
func checkPattern(pat string) string {
	for i := 0; i < len(pat); i++ {
		if pat[i] == '\\' {
			if i+1 == len(pat) {
				return `ends in an escape (\) with nothing to escape`
			}
			_, n := utf8.DecodeRuneInString(pat[i+1:])
			i += n
		}
	}
	return ""
}
