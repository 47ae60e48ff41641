// Package cql2 reads filters in OGC CQL2 (21-065r2, "Common Query
// Language"), checks them against the queryables of a level and evaluates
// them over columns of rows, with SQL's three-valued logic.
//
// # Use
//
//	e, err := cql2.ParseText(`cell_type = 'pyramidal' AND volume > 2.5`) // or ParseJSON, Parse(lang, src)
//	f, err := cql2.Check(e, &cql2.Schema{Queryables: qs, ObjectID: true})
//	ev := f.NewEvaluator()            // one per goroutine; reused chunk after chunk
//	if !ev.MayMatch() { … }           // the filter can match no row of the level
//	for each chunk {
//		for _, name := range f.Attributes() { ev.Bind(name, cql2.Column{DType: …, Data: …, Labels: …}) }
//		ev.BindObjectIDs(ids, -1)     // when f.NeedsObjectIDs(); BindGroups when f.NeedsGroups()
//		rows, err = ev.Select(rows[:0], rows) // or Eval(rows, out), EvalRange, SelectRange
//	}
//
// Every error about the filter itself — syntax, JSON structure, a property
// the level lacks, a literal of the wrong type — is an *Error whose message
// names the offending property, literal or token and, for syntax errors,
// the 0-based character position: `filter: expected ')' at position 40
// (end of input)`. A mistake of the caller (a column that does not fit its
// queryable, a row outside the bound columns) is a plain error.
//
// # Language
//
// Both encodings give one tree (Expr); text and JSON that mean the same give
// equal trees, and Expr.String and FormatJSON print a tree that parses back
// to an equal one.
//
// cql2-text: comparisons = <> < <= > >=, BETWEEN … AND …, IN (…), IS [NOT]
// NULL, LIKE, the negations NOT BETWEEN, NOT IN, NOT LIKE, and AND, OR, NOT,
// parentheses; keywords in any case; precedence NOT over AND over OR;
// operators need no spaces (x>=1). Property names are identifiers (letters,
// digits, _, :, .; not starting with a digit or .) or double-quoted, with a
// double quote inside written twice; a property named like a keyword must
// be quoted. Strings are single-quoted, with a single quote inside written
// twice; a backslash is an ordinary character in a string (the standard's
// backslash-quote escape is not read, so that every string, and every LIKE
// escape, can be written). Numbers are [sign] digits [. digits] [e [sign]
// digits] (also 5. and .5), with as many significant digits as wanted (17
// are enough to write any float64); TRUE and FALSE are filters of their
// own. Functions (S_INTERSECTS, CASEI, DATE, …), spatial, temporal and
// array predicates and arithmetic are refused by name. For example:
//
//	cell_type IN ('basket', 'pyramidal') AND NOT volume BETWEEN 0 AND 2.5
//	"cell type" = 'it''s' OR embedding[3] >= -1e-3
//	name NOT LIKE 'tmp\_%' AND object_id IS NOT NULL
//
// cql2-json: {"op": …, "args": […]} with the ops and, or (two or more
// arguments), not (one), =, <>, <, <=, >, >= (two), between (three: value,
// low, high), in ([value, [list]]), like ([value, pattern]), isNull (one);
// operands {"property": name}, strings, numbers, true, false.
//
// Filters longer than MaxLength bytes or nested deeper than MaxDepth
// (parentheses, NOT, JSON operators) are refused, so that hostile input
// costs bounded time and stack.
//
// # Properties
//
// A filter names the attributes of the level (Schema.Queryables), object_id
// (the row's object id) and group (membership of the row's object in a
// group) when the Schema offers them. Channel i (0-based) of a
// multi-channel attribute is the property name[i], written bare
// (embedding[3]) or quoted ("embedding[3]"); the attribute's plain name is
// then no property. A predicate compares a property with literals: a
// property on both sides, or on neither, is an error.
//
//   - Float, Int, Uint attributes and object_id take numbers: comparisons,
//     BETWEEN, IN, IS NULL.
//   - Categorical attributes compare by label, with strings: = <> < <= > >=
//     (by bytes, which is Unicode code point order), IN, LIKE, IS NULL. A
//     label the dictionary lacks is not an error: it matches no row (=, IN
//     and LIKE are false, <> true), since dictionaries differ from level to
//     level and store to store, and the same filter should run on all.
//   - String attributes take the same operators as categorical ones.
//   - group takes = <> IN IS NULL with integer group ids; group <> g is
//     NOT (group = g), group IN (…) is membership in any of them.
//
// # Numbers
//
// A float attribute's value is widened exactly to float64 and compared with
// the literal read as float64 (the nearest float64 to the decimal). So a
// float32 value written as its shortest float32 decimal need not equal it:
// the float32 nearest 0.1 is 0.100000001490116…, and volume = 0.1 does not
// match it; volume = 0.10000000149011612 does, as do BETWEEN and the
// inequalities around it. An integer attribute or object_id is compared
// exactly with the literal: an integer literal exactly (to 64 bits, so ids
// beyond 2⁵³ work), any other as its float64 value (x < 2.5 is x <= 2;
// x = 2.5 matches nothing). BETWEEN a AND b with a > b matches nothing.
//
// # Nulls
//
// Null are: NaN and ±Inf floats; a categorical code equal to the
// dictionary's null code or without a label (negative, or past the last
// label); object_id of a row without an object; group of a row without an
// object or whose object is in no group. Integers and strings are never
// null. A comparison, BETWEEN, IN or LIKE of a null is unknown, and NOT of
// unknown is unknown; AND is false if any argument is false, else unknown
// if any is unknown; OR is true if any is true, else unknown if any is
// unknown. A row passes only when the filter is true. IS NULL is true for
// exactly the null values, IS NOT NULL for the others (it is never
// unknown).
//
// # Evaluation
//
// A Filter compiles NOT into its leaves; each leaf is an interval test
// fitted to the column's type (exact for integers), a table over a
// dictionary's codes (so LIKE on labels costs one pass over the
// dictionary, not one per row), a string test, or an object or group test.
// An Evaluator runs the rows of a chunk through the tree in blocks of a few
// hundred, reading each column once per block, with no allocation once
// warm. MayMatch tells whether a chunk (or, with nothing bound, the level)
// can hold a passing row at all, before its rows are read.
package cql2
