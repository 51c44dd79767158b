#include "textflag.h"

// func Line(addr uintptr)
TEXT ·Line(SB), NOSPLIT, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

// func Pointee(at uintptr)
TEXT ·Pointee(SB), NOSPLIT, $0-8
	MOVD at+0(FP), R0
	CBZ R0, none
	MOVD (R0), R0
	CBZ R0, none
	PRFM (R0), PLDL1KEEP
none:
	RET

// func LineAndRecordW(line, rec uintptr)
TEXT ·LineAndRecordW(SB), NOSPLIT, $0-16
	MOVD line+0(FP), R0
	PRFM (R0), PLDL1KEEP
	MOVD rec+8(FP), R0
	CBZ R0, donew
	PRFM (R0), PSTL1KEEP
	PRFM 64(R0), PSTL1KEEP
donew:
	RET
