package neuroglancer

import "github.com/zvfserve/zvfserve/api/problem"

// The problems these routes find themselves; the reader's errors pass
// through unchanged to the API, which classifies them.

func badParam(detail string) error { return problem.New(problem.BadParameter, detail) }

func notFoundf(format string, a ...any) error { return problem.Newf(problem.NotFound, format, a...) }

func corruptf(format string, a ...any) error { return problem.Newf(problem.CorruptData, format, a...) }

func tooLargef(format string, a ...any) error { return problem.Newf(problem.TooLarge, format, a...) }

func unsatisfiable(detail string) error { return problem.New(problem.RangeNotSatisfiable, detail) }
