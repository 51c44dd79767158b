package activation

import "errors"

var errNilGrain = errors.New("granary: factory returned a nil grain")
