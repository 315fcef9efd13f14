package nftplan

import "errors"

// Errors of planning and queueing; test with errors.Is.
var (
	ErrNotIPv4         = errors.New("address is not IPv4")
	ErrBadPrefix       = errors.New("prefix is not a canonical IPv4 network")
	ErrDuplicatePrefix = errors.New("prefix appears twice")
	ErrInterfaceName   = errors.New("interface name must be 1 to 15 bytes of letters, digits, '-', '_' or '.'")
	ErrSameInterface   = errors.New("sandbox and upstream interfaces must differ")
	ErrUnknownOp       = errors.New("operation is not one of the planned kinds")
	ErrForeignTable    = errors.New("operation names a table other than lazaret")
	ErrBadProbe        = errors.New("readiness probe needs IPv4 source and destination addresses and nonzero ports")
	ErrDuplicateProbe  = errors.New("readiness probe appears twice")
)
