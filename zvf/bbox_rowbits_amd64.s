//go:build amd64 && !purego

#include "textflag.h"

// The row kernels' inner loops in AVX2 (bbox_rowbits_amd64.go). A step
// takes 8 rows: 96 bytes, three YMM loads of 8 lanes, lane j holding
// axis j%3 of row j/3. Each lane is tested as rowBits' runs: d = x-l
// (of x's key when keyed), inside when d <= w unsigned, found as
// min(d, w) == d (AVX2 has no unsigned compare). The lanes' verdicts
// become a 24-bit mask (VMOVMSKPS); row i is inside when its three bits
// 3i, 3i+1, 3i+2 are set: t = m & m>>1 & m>>2 has row i's verdict at
// bit 3i (no PEXT: it is slow on AMD Zen 1/2, and BT reads the bit
// where it lies). A step wholly inside is stored at once, one wholly
// outside skipped; otherwise every row is written and the count
// advanced by its bit (BT sets CF, ADC adds it), as the Go kernels do.
//
// A row is copied with one 16-byte load and store, so a step reads 4
// bytes past its 96 and writes 4 past its last row: the loop runs while
// at least 108 bytes (9 rows) remain, so the reads stay in src and the
// writes below the next row's place in dst (dst has src's length).
//
// Registers: SI src, CX bytes of src left, DI dst, DX nums, R8 keyed,
// R9 rows kept, R11 the step's first row number; Y3-Y5 the runs' first
// patterns per lane, Y6-Y8 their widths; Y13 the step's row numbers,
// Y14 eight of 8.

// iota<> is the row numbers of a step's lanes from its first.
DATA iota<>+0(SB)/4, $0
DATA iota<>+4(SB)/4, $1
DATA iota<>+8(SB)/4, $2
DATA iota<>+12(SB)/4, $3
DATA iota<>+16(SB)/4, $4
DATA iota<>+20(SB)/4, $5
DATA iota<>+24(SB)/4, $6
DATA iota<>+28(SB)/4, $7
GLOBL iota<>(SB), RODATA|NOPTR, $32

// LANES spreads the runs at R (bitRuns: l at 16i, w+1 at 16i+8) over
// the lanes: the three vectors' axes are x y z x y z x y, z x y z x y z
// x, y z x y z x y z; the blend masks pick the y and z lanes. A width
// is w+1's low 32 bits less one (2^32, every pattern, gives 2^32-1).
#define LANES(R) \
	VPBROADCASTD 0(R), Y9; \
	VPBROADCASTD 16(R), Y10; \
	VPBROADCASTD 32(R), Y11; \
	VPBLENDD $0x92, Y10, Y9, Y3; \
	VPBLENDD $0x24, Y11, Y3, Y3; \
	VPBLENDD $0x24, Y10, Y9, Y4; \
	VPBLENDD $0x49, Y11, Y4, Y4; \
	VPBLENDD $0x49, Y10, Y9, Y5; \
	VPBLENDD $0x92, Y11, Y5, Y5; \
	VPCMPEQD Y12, Y12, Y12; \
	VPBROADCASTD 8(R), Y9; \
	VPBROADCASTD 24(R), Y10; \
	VPBROADCASTD 40(R), Y11; \
	VPADDD Y12, Y9, Y9; \
	VPADDD Y12, Y10, Y10; \
	VPADDD Y12, Y11, Y11; \
	VPBLENDD $0x92, Y10, Y9, Y6; \
	VPBLENDD $0x24, Y11, Y6, Y6; \
	VPBLENDD $0x24, Y10, Y9, Y7; \
	VPBLENDD $0x49, Y11, Y7, Y7; \
	VPBLENDD $0x49, Y10, Y9, Y8; \
	VPBLENDD $0x92, Y11, Y8, Y8

// SUBPLAIN: d = x - l per lane, into Y9-Y11 (bits).
#define SUBPLAIN \
	VPSUBD Y3, Y0, Y9; \
	VPSUBD Y4, Y1, Y10; \
	VPSUBD Y5, Y2, Y11

// SUBKEYED: d = key(x) - l per lane, key(x) = x ^ (x>>31 arithmetic)>>1
// logical (rowKey).
#define SUBKEYED \
	VPSRAD $31, Y0, Y9; \
	VPSRAD $31, Y1, Y10; \
	VPSRAD $31, Y2, Y11; \
	VPSRLD $1, Y9, Y9; \
	VPSRLD $1, Y10, Y10; \
	VPSRLD $1, Y11, Y11; \
	VPXOR Y0, Y9, Y9; \
	VPXOR Y1, Y10, Y10; \
	VPXOR Y2, Y11, Y11; \
	VPSUBD Y3, Y9, Y9; \
	VPSUBD Y4, Y10, Y10; \
	VPSUBD Y5, Y11, Y11

// MASK: AX = the step's rows' verdicts, row i's at bit 3i (only there).
#define MASK \
	VPMINUD Y6, Y9, Y12; \
	VPCMPEQD Y12, Y9, Y9; \
	VPMINUD Y7, Y10, Y12; \
	VPCMPEQD Y12, Y10, Y10; \
	VPMINUD Y8, Y11, Y12; \
	VPCMPEQD Y12, Y11, Y11; \
	VMOVMSKPS Y9, AX; \
	VMOVMSKPS Y10, BX; \
	VMOVMSKPS Y11, R12; \
	SHLL $8, BX; \
	SHLL $16, R12; \
	ORL BX, AX; \
	ORL R12, AX; \
	MOVL AX, BX; \
	SHRL $1, BX; \
	MOVL AX, R12; \
	SHRL $2, R12; \
	ANDL BX, AX; \
	ANDL R12, AX; \
	ANDL $0x249249, AX

// COPYROW writes row i's 12 bytes (16 moved) at dst's row R9 and counts
// it when inside.
#define COPYROW(i) \
	VMOVDQU (12*i)(SI), X12; \
	LEAQ (R9)(R9*2), R10; \
	VMOVDQU X12, (DI)(R10*4); \
	BTL $(3*i), AX; \
	ADCQ $0, R9

// NUMROW writes row i's number at nums' R9 and counts it when inside.
#define NUMROW(i) \
	LEAL i(R11), R12; \
	MOVL R12, (DX)(R9*4); \
	BTL $(3*i), AX; \
	ADCQ $0, R9

// NUMCOPYROW writes row i's number and bytes and counts it when inside.
#define NUMCOPYROW(i) \
	VMOVDQU (12*i)(SI), X12; \
	LEAQ (R9)(R9*2), R10; \
	VMOVDQU X12, (DI)(R10*4); \
	LEAL i(R11), R12; \
	MOVL R12, (DX)(R9*4); \
	BTL $(3*i), AX; \
	ADCQ $0, R9

// func copyRowsAVX2(dst, src []byte, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·copyRowsAVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ runs+48(FP), R8
	LANES(R8)
	MOVBQZX keyed+56(FP), R8
	XORQ R9, R9

copyLoop:
	CMPQ CX, $108
	JB   copyDone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	TESTQ R8, R8
	JNZ  copyKeyed
	SUBPLAIN
	JMP  copyTested

copyKeyed:
	SUBKEYED

copyTested:
	MASK
	CMPL AX, $0x249249
	JEQ  copyAll
	TESTL AX, AX
	JZ   copyNext
	COPYROW(0)
	COPYROW(1)
	COPYROW(2)
	COPYROW(3)
	COPYROW(4)
	COPYROW(5)
	COPYROW(6)
	COPYROW(7)
	JMP  copyNext

copyAll:
	LEAQ (R9)(R9*2), R10
	VMOVDQU Y0, (DI)(R10*4)
	VMOVDQU Y1, 32(DI)(R10*4)
	VMOVDQU Y2, 64(DI)(R10*4)
	ADDQ $8, R9

copyNext:
	ADDQ $96, SI
	SUBQ $96, CX
	JMP  copyLoop

copyDone:
	VZEROUPPER
	MOVQ src_len+32(FP), AX
	SUBQ CX, AX
	MOVQ AX, done+64(FP)
	MOVQ R9, kept+72(FP)
	RET

// func matchRowsAVX2(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·matchRowsAVX2(SB), NOSPLIT, $0-88
	MOVQ nums_base+0(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVL r+48(FP), R11
	MOVQ runs+56(FP), R8
	LANES(R8)
	MOVBQZX keyed+64(FP), R8
	XORQ R9, R9
	VMOVD R11, X13
	VPBROADCASTD X13, Y13
	VPADDD iota<>(SB), Y13, Y13
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

matchLoop:
	CMPQ CX, $108
	JB   matchDone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	TESTQ R8, R8
	JNZ  matchKeyed
	SUBPLAIN
	JMP  matchTested

matchKeyed:
	SUBKEYED

matchTested:
	MASK
	CMPL AX, $0x249249
	JEQ  matchAll
	TESTL AX, AX
	JZ   matchNext
	NUMROW(0)
	NUMROW(1)
	NUMROW(2)
	NUMROW(3)
	NUMROW(4)
	NUMROW(5)
	NUMROW(6)
	NUMROW(7)
	JMP  matchNext

matchAll:
	VMOVDQU Y13, (DX)(R9*4)
	ADDQ $8, R9

matchNext:
	ADDQ $96, SI
	SUBQ $96, CX
	ADDL $8, R11
	VPADDD Y14, Y13, Y13
	JMP  matchLoop

matchDone:
	VZEROUPPER
	MOVQ src_len+32(FP), AX
	SUBQ CX, AX
	MOVQ AX, done+72(FP)
	MOVQ R9, kept+80(FP)
	RET

// func matchCopyRowsAVX2(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·matchCopyRowsAVX2(SB), NOSPLIT, $0-112
	MOVQ nums_base+0(FP), DX
	MOVQ dst_base+24(FP), DI
	MOVQ src_base+48(FP), SI
	MOVQ src_len+56(FP), CX
	MOVL r+72(FP), R11
	MOVQ runs+80(FP), R8
	LANES(R8)
	MOVBQZX keyed+88(FP), R8
	XORQ R9, R9
	VMOVD R11, X13
	VPBROADCASTD X13, Y13
	VPADDD iota<>(SB), Y13, Y13
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

bothLoop:
	CMPQ CX, $108
	JB   bothDone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	TESTQ R8, R8
	JNZ  bothKeyed
	SUBPLAIN
	JMP  bothTested

bothKeyed:
	SUBKEYED

bothTested:
	MASK
	CMPL AX, $0x249249
	JEQ  bothAll
	TESTL AX, AX
	JZ   bothNext
	NUMCOPYROW(0)
	NUMCOPYROW(1)
	NUMCOPYROW(2)
	NUMCOPYROW(3)
	NUMCOPYROW(4)
	NUMCOPYROW(5)
	NUMCOPYROW(6)
	NUMCOPYROW(7)
	JMP  bothNext

bothAll:
	VMOVDQU Y13, (DX)(R9*4)
	LEAQ (R9)(R9*2), R10
	VMOVDQU Y0, (DI)(R10*4)
	VMOVDQU Y1, 32(DI)(R10*4)
	VMOVDQU Y2, 64(DI)(R10*4)
	ADDQ $8, R9

bothNext:
	ADDQ $96, SI
	SUBQ $96, CX
	ADDL $8, R11
	VPADDD Y14, Y13, Y13
	JMP  bothLoop

bothDone:
	VZEROUPPER
	MOVQ src_len+56(FP), AX
	SUBQ CX, AX
	MOVQ AX, done+96(FP)
	MOVQ R9, kept+104(FP)
	RET
