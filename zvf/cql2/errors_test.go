package cql2

import (
	"errors"
	"strings"
	"testing"
)

// errorCase is a filter that does not parse, the message of its error
// and the position it names (-1: none).
type errorCase struct {
	src, msg string
	pos      int
}

// checkErrors parses each case's filter and checks its *Error.
func checkErrors(t *testing.T, name string, parse func(string) (Expr, error), cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		_, err := parse(tc.src)
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("%s(%q) = %v, want an *Error", name, tc.src, err)
			continue
		}
		if fe.Error() != "filter: "+tc.msg || fe.Pos != tc.pos {
			t.Errorf("%s(%q):\n got %q (pos %d)\nwant %q (pos %d)", name, tc.src, fe.Error(), fe.Pos, "filter: "+tc.msg, tc.pos)
		}
	}
}

// TestTextErrors: each syntax error names the token and its 0-based
// character position.
func TestTextErrors(t *testing.T) {
	deep := strings.Repeat("(", MaxDepth+1) + "x = 1" + strings.Repeat(")", MaxDepth+1)
	checkErrors(t, "ParseText", ParseText, []errorCase{
		{`cell_type = 'pyramidal' AND (volume > 25`, `expected ')' at position 40 (end of input)`, 40},
		{`x = `, `expected a property or a literal at position 4 (end of input)`, 4},
		{`x 5`, `expected an operator after x at position 2 (found 5)`, 2},
		{`x = 1 y = 2`, `expected AND, OR or the end of the filter at position 6 (found y)`, 6},
		{`x = 1)`, `expected AND, OR or the end of the filter at position 5 (found ))`, 5},
		{`x = 'abc`, `unterminated string starting at position 4`, 4},
		{`"x = 1`, `unterminated property name starting at position 0`, 0},
		{`"" = 1`, `empty property name at position 0`, 0},
		{`x BETWEEN 1 OR 2`, `expected AND at position 12 (found OR)`, 12},
		{`x IN 1`, `expected '(' after IN at position 5 (found 1)`, 5},
		{`x IN (1 2)`, `expected ',' or ')' at position 8 (found 2)`, 8},
		{`x IN ()`, `expected a property or a literal at position 6 (found ))`, 6},
		{`x IS 5`, `expected NULL at position 5 (found 5)`, 5},
		{`x IS NOT 5`, `expected NULL at position 9 (found 5)`, 9},
		{`x NOT = 1`, `expected LIKE, BETWEEN or IN after NOT at position 6 (found =)`, 6},
		{`x LIKE y`, `expected a string pattern after LIKE at position 7 (found y)`, 7},
		{`x LIKE 'ab\'`, `LIKE pattern 'ab\' at position 7 ends in an escape (\) with nothing to escape`, 7},
		{`x = 1.2.3`, `malformed number "1.2.3" at position 4`, 4},
		{`x = 5abc`, `malformed number "5abc" at position 4`, 4},
		{`x = 1e`, `malformed number "1e" at position 4`, 4},
		{`x = 1e999`, `number 1e999 at position 4 is out of range`, 4},
		{`x = -y`, `unexpected '-' at position 4 (arithmetic is not supported)`, 4},
		{`x = 1 + 2`, `unexpected '+' at position 6 (arithmetic is not supported)`, 6},
		{`x ! 1`, `unexpected character '!' at position 2`, 2},
		{`x != 1`, `unexpected character '!' at position 2`, 2},
		{`S_INTERSECTS(geom, POINT(1 2))`, `function S_INTERSECTS at position 0 is not supported`, 0},
		{`CASEI(name) = casei('a')`, `function CASEI at position 0 is not supported`, 0},
		{`t > DATE ('2020-01-01')`, `function DATE at position 4 is not supported`, 4},
		{`embedding[ = 1`, `expected a channel number and ']' after "embedding" at position 9`, 9},
		{`embedding[x] = 1`, `expected a channel number and ']' after "embedding" at position 9`, 9},
		{`x = 1 AND`, `expected a property or a literal at position 9 (end of input)`, 9},
		{`AND x = 1`, `expected a property or a literal at position 0 (found AND)`, 0},
		{`x`, `expected an operator after x at position 1 (end of input)`, 1},
		{``, `empty filter`, 0},
		{" \t\n", `empty filter`, 0},
		// Positions count characters, not bytes.
		{`größe = 'ä' AND (`, `expected a property or a literal at position 17 (end of input)`, 17},
		{"x = 'a\xffb'", `invalid UTF-8 at position 6`, 6},
		{deep, `filter nested deeper than 64 at position 64`, 64},
		{strings.Repeat("NOT ", MaxDepth+1) + "x = 1", `filter nested deeper than 64 at position 256`, 256},
		{`x = '` + strings.Repeat("a", 50) + `' y`, `expected AND, OR or the end of the filter at position 57 (found y)`, 57},
		{`x = 1 AND ` + strings.Repeat("b", 50), `expected an operator after ` + strings.Repeat("b", 40) + `… at position 60 (end of input)`, 60},
	})
	long := "x IN (" + strings.Repeat("1,", MaxLength/2) + "1)"
	if _, err := ParseText(long); err == nil || !strings.Contains(err.Error(), "the most accepted is 65536") {
		t.Errorf("over-long filter: %v", err)
	}
	// At the limit, nesting is fine.
	ok := strings.Repeat("(", MaxDepth) + "x = 1" + strings.Repeat(")", MaxDepth)
	if _, err := ParseText(ok); err != nil {
		t.Errorf("nesting %d: %v", MaxDepth, err)
	}
}

func TestJSONErrors(t *testing.T) {
	deep := strings.Repeat(`{"op":"not","args":[`, MaxDepth+1) + `true` + strings.Repeat(`]}`, MaxDepth+1)
	checkErrors(t, "ParseJSON", func(src string) (Expr, error) { return ParseJSON([]byte(src)) }, []errorCase{
		{`{"op":"between","args":[{"property":"x"},1]}`, `"between" takes 3 arguments, got 2`, -1},
		{`{"op":"and","args":[true]}`, `"and" takes at least 2 arguments, got 1`, -1},
		{`{"op":"not","args":[true,false]}`, `"not" takes 1 argument, got 2`, -1},
		{`{"op":"foo","args":[]}`, `operator "foo" is not supported (and, or, not, =, <>, <, <=, >, >=, between, in, like, isNull are)`, -1},
		{`{"op":"s_intersects","args":[{"property":"geom"},{"type":"Point","coordinates":[1,2]}]}`,
			`operator "s_intersects" is not supported (and, or, not, =, <>, <, <=, >, >=, between, in, like, isNull are)`, -1},
		{`{"op":"in","args":[{"property":"x"},1]}`, `"in" takes [value, [list]] with a list of at least one literal; got number 1 as the list`, -1},
		{`{"op":"in","args":[{"property":"x"},[]]}`, `"in" takes [value, [list]] with a list of at least one literal; got an array as the list`, -1},
		{`{"op":"like","args":[{"property":"x"},5]}`, `"like" pattern must be a string, got number 5`, -1},
		{`{"op":"like","args":[{"property":"x"},"a\\"]}`, `LIKE pattern 'a\' ends in an escape (\) with nothing to escape`, -1},
		{`{"op":"=","args":[{"property":"x"},null]}`, `operands of "=" must be properties or literals, got null`, -1},
		{`{"op":"=","args":[{"property":"x"},{"date":"2020-01-01"}]}`, `"date" literals are not supported (operand of "=")`, -1},
		{`{"op":"=","args":[{"property":"x"},{"op":"=","args":[1,1]}]}`, `operands of "=" must be properties or literals, got operator "="`, -1},
		{`{"op":"=","args":[{"property":5},1]}`, `"property" must be a string, got number 5`, -1},
		{`{"op":"=","args":[{"property":""},1]}`, `empty property name`, -1},
		{`{"op":"=","args":[{"property":"x","y":1},1]}`, `property "x" has other members: "property", "y"`, -1},
		{`{"op":"=","args":[{"property":"x"},1],"extra":1}`, `operator "=" has an unknown member "extra"`, -1},
		{`{"op":"="}`, `operator "=" has no "args"`, -1},
		{`{"op":"=","args":{}}`, `"args" of "=" must be an array, got an object with keys `, -1},
		{`{"op":5,"args":[]}`, `"op" must be a string, got number 5`, -1},
		{`{"op":"and","args":[{"op":"=","args":[{"property":"x"},1]},5]}`, `expected a boolean expression ({"op": …, "args": […]}, true or false), got number 5`, -1},
		{`{"property":"x"}`, `expected a boolean expression ({"op": …, "args": […]}, true or false), got an object with keys "property"`, -1},
		{`{"op":"=","args":[{"property":"x"}`, `invalid JSON at position 34: unexpected end of input`, 34},
		{`{"op":"=","args":[{"property":"x"},1]} x`, `invalid JSON at position 39: data after the filter`, 39},
		{`{"op":"=","args":[{"property":"x"},01]}`, `invalid JSON at position 36: invalid character '1' after array element`, 36},
		{`{"op":"=","args":[{"property":"größe"},1e999]}`, `number 1e999 is out of range`, -1},
		{`{"op":"=","args":[{"property":"größe"} 1]}`, `invalid JSON at position 39: invalid character '1' after array element`, 39},
		{``, `empty filter`, 0},
		{deep, `filter nested deeper than 64`, -1},
		{strings.Repeat("[", 200), `filter nested deeper than 64 at position 132`, 132},
	})
}

// testSchema has one queryable of each kind.
func testSchema() *Schema {
	return &Schema{
		Queryables: []Queryable{
			{Name: "size", Kind: Float, Bits: 32},
			{Name: "count", Kind: Int, Bits: 16},
			{Name: "flags", Kind: Uint, Bits: 8},
			{Name: "cell_type", Kind: Categorical, Labels: []string{"basket", "pyramidal", "stellate"}},
			{Name: "name", Kind: String},
			{Name: "embedding", Kind: Float, Bits: 64, Channels: 8},
		},
		ObjectID: true,
		Group:    true,
	}
}

// TestCheckErrors: a filter that does not fit the queryables is an *Error
// naming the property.
func TestCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		src, msg, prop string
	}{
		{`volume > 1`, `unknown property "volume"`, "volume"},
		{`size LIKE 'a%'`, `LIKE applies to string and categorical properties; "size" is float32`, "size"},
		{`object_id LIKE '1%'`, `LIKE applies to string and categorical properties; "object_id" is an integer (object id)`, "object_id"},
		{`size = 'big'`, `property "size" is float32; it cannot be compared with string 'big'`, "size"},
		{`'big' < size`, `property "size" is float32; it cannot be compared with string 'big'`, "size"},
		{`count IN (1, 'a')`, `property "count" is int16; it cannot be compared with string 'a'`, "count"},
		{`size = TRUE`, `property "size" is float32; it cannot be compared with boolean TRUE`, "size"},
		{`cell_type = 3`, `property "cell_type" is categorical (compared by label); it cannot be compared with number 3`, "cell_type"},
		{`cell_type BETWEEN 'a' AND 'c'`, `BETWEEN applies to numeric properties; "cell_type" is categorical (compared by label)`, "cell_type"},
		{`name BETWEEN 1 AND 2`, `BETWEEN applies to numeric properties; "name" is string`, "name"},
		{`size BETWEEN 1 AND 'z'`, `property "size" is float32; it cannot be compared with string 'z'`, "size"},
		{`size BETWEEN count AND 2`, `property "size" is float32; it cannot be compared with property count`, "size"},
		{`group < 3`, `only =, <>, IN and IS NULL apply to group, not <`, "group"},
		{`group BETWEEN 1 AND 3`, `BETWEEN applies to numeric properties; "group" is a group`, "group"},
		{`group = 1.5`, `group ids are 64-bit integers; got number 1.5`, "group"},
		{`group IN (1, 'a')`, `group ids are 64-bit integers; got string 'a'`, "group"},
		{`group = 9223372036854775808`, `group ids are 64-bit integers; got number 9223372036854775808`, "group"},
		{`embedding > 0`, `property "embedding" has 8 channels; name one as embedding[0] to embedding[7]`, "embedding"},
		{`embedding[8] > 0`, `unknown property "embedding[8]": "embedding" has 8 channels, embedding[0] to embedding[7]`, "embedding[8]"},
		{`embedding[03] > 0`, `unknown property "embedding[03]": a channel is named embedding[i], i a decimal number without leading zeros`, "embedding[03]"},
		{`size[0] > 0`, `unknown property "size[0]": "size" has one channel; name it size`, "size[0]"},
		{`size = count`, `comparing two properties (size = count) is not supported; compare a property with a literal`, "size"},
		{`1 = 1`, `comparison of two literals (1 = 1); compare a property with a literal`, ""},
		{`5 BETWEEN 1 AND 7`, `BETWEEN needs a property on its left, got number 5`, ""},
		{`'a' LIKE 'a'`, `LIKE needs a property on its left, got string 'a'`, ""},
		{`TRUE IS NULL`, `IS NULL needs a property on its left, got boolean TRUE`, ""},
		// An error anywhere is reported, even in a branch that cannot matter.
		{`FALSE AND volume = 1`, `unknown property "volume"`, "volume"},
	} {
		e, err := ParseText(tc.src)
		if err != nil {
			t.Fatalf("ParseText(%q): %v", tc.src, err)
		}
		_, err = Check(e, testSchema())
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("Check(%q) = %v, want an *Error", tc.src, err)
			continue
		}
		if fe.Error() != "filter: "+tc.msg || fe.Property != tc.prop || fe.Pos != -1 {
			t.Errorf("Check(%q):\n got %q (property %q, pos %d)\nwant %q (property %q)", tc.src, fe.Error(), fe.Property, fe.Pos, "filter: "+tc.msg, tc.prop)
		}
	}
	// Without object ids or groups, those properties are unknown.
	for _, src := range []string{`object_id = 1`, `group = 1`} {
		e, _ := ParseText(src)
		s := testSchema()
		s.ObjectID, s.Group = false, false
		if _, err := Check(e, s); err == nil || !strings.Contains(err.Error(), "unknown property") {
			t.Errorf("Check(%q) without specials: %v", src, err)
		}
	}
}

// TestSchemaErrors: a malformed schema is the caller's mistake, a plain
// error.
func TestSchemaErrors(t *testing.T) {
	e, _ := ParseText(`a = 1`)
	for _, tc := range []struct {
		s   Schema
		msg string
	}{
		{Schema{Queryables: []Queryable{{Name: "a", Kind: Float}, {Name: "a", Kind: Int}}}, `cql2: queryable "a" listed twice`},
		{Schema{Queryables: []Queryable{{Name: "", Kind: Float}}}, `cql2: queryable 0 has no name`},
		{Schema{Queryables: []Queryable{{Name: "a"}}}, `cql2: queryable "a" has kind kind(0)`},
		{Schema{Queryables: []Queryable{{Name: "object_id", Kind: Int}}, ObjectID: true}, `cql2: queryable "object_id" hides the special property of that name`},
		{Schema{Queryables: []Queryable{{Name: "a", Kind: Int, Bits: 128}}}, `cql2: queryable "a" has 0 channels, 128 bits`},
	} {
		_, err := Check(e, &tc.s)
		var fe *Error
		if err == nil || errors.As(err, &fe) || err.Error() != tc.msg {
			t.Errorf("Check with %+v: %v, want plain %q", tc.s, err, tc.msg)
		}
	}
}
