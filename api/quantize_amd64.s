//go:build amd64 && !purego

#include "textflag.h"

// Three loads of 8 float32 × 3 rows hold 24 values, value e (axis e%3 of
// row e/3) in lane e%8 of load e/8. An axis's 8 values sit in lanes no
// other load uses for it, so two blends gather them into one register
// (x: load 0's lanes 0 3 6, load 1's 1 4 7, load 2's 2 5; y and z alike)
// and one VPERMPS by the lane orders below puts them in row order.
DATA quantLanes<>+0(SB)/4, $0 // x
DATA quantLanes<>+4(SB)/4, $3
DATA quantLanes<>+8(SB)/4, $6
DATA quantLanes<>+12(SB)/4, $1
DATA quantLanes<>+16(SB)/4, $4
DATA quantLanes<>+20(SB)/4, $7
DATA quantLanes<>+24(SB)/4, $2
DATA quantLanes<>+28(SB)/4, $5
DATA quantLanes<>+32(SB)/4, $1 // y
DATA quantLanes<>+36(SB)/4, $4
DATA quantLanes<>+40(SB)/4, $7
DATA quantLanes<>+44(SB)/4, $2
DATA quantLanes<>+48(SB)/4, $5
DATA quantLanes<>+52(SB)/4, $0
DATA quantLanes<>+56(SB)/4, $3
DATA quantLanes<>+60(SB)/4, $6
DATA quantLanes<>+64(SB)/4, $2 // z
DATA quantLanes<>+68(SB)/4, $5
DATA quantLanes<>+72(SB)/4, $0
DATA quantLanes<>+76(SB)/4, $3
DATA quantLanes<>+80(SB)/4, $6
DATA quantLanes<>+84(SB)/4, $1
DATA quantLanes<>+88(SB)/4, $4
DATA quantLanes<>+92(SB)/4, $7
// float32 exponent bits, 8 lanes
DATA quantLanes<>+96(SB)/8, $0x7f8000007f800000
DATA quantLanes<>+104(SB)/8, $0x7f8000007f800000
DATA quantLanes<>+112(SB)/8, $0x7f8000007f800000
DATA quantLanes<>+120(SB)/8, $0x7f8000007f800000
// float64 magnitude bits, 4 lanes
DATA quantLanes<>+128(SB)/8, $0x7fffffffffffffff
DATA quantLanes<>+136(SB)/8, $0x7fffffffffffffff
DATA quantLanes<>+144(SB)/8, $0x7fffffffffffffff
DATA quantLanes<>+152(SB)/8, $0x7fffffffffffffff
GLOBL quantLanes<>(SB), RODATA|NOPTR, $160

// SPLIT: X, Y, Z = axes 0, 1 and 2 of the 8 rows whose 24 values A, B
// and C hold (value e in lane e%8 of the (e/8)th), in row order; T is
// scratch, A, B and C are kept.
#define SPLIT(A, B, C, X, Y, Z, T) \
	VBLENDPS $0x92, B, A, X; \
	VBLENDPS $0x24, C, X, X; \
	VBLENDPS $0x24, B, A, Y; \
	VBLENDPS $0x49, C, Y, Y; \
	VBLENDPS $0x49, B, A, Z; \
	VBLENDPS $0x92, C, Z, Z; \
	VMOVDQU  quantLanes<>+0(SB), T; \
	VPERMPS  X, T, X; \
	VMOVDQU  quantLanes<>+32(SB), T; \
	VPERMPS  Y, T, Y; \
	VMOVDQU  quantLanes<>+64(SB), T; \
	VPERMPS  Z, T, Z

// HALF: cellRule.first of the 4 float64 values in V by the rule at
// K(DX) (inv, k0, last, s, off, p, each in 4 lanes, 32 bytes apart), the
// same operations in the same order, none fused: t = x*inv - k0 clamped
// to [0, last] and truncated is the cell k; |off + k*s - x| <= p says it
// decodes within p. The cells (int32) go to OUT, each lane's verdict is
// ANDed into Y12.
#define HALF(V, OUT, K) \
	VMULPD      K(DX), V, Y8; \
	VSUBPD      K+32(DX), Y8, Y8; \
	VMAXPD      Y13, Y8, Y8; \
	VMINPD      K+64(DX), Y8, Y8; \
	VROUNDPD    $3, Y8, Y8; \
	VMULPD      K+96(DX), Y8, Y9; \
	VADDPD      K+128(DX), Y9, Y9; \
	VSUBPD      V, Y9, Y9; \
	VANDPD      Y14, Y9, Y9; \
	VCMPPD      $2, K+160(DX), Y9, Y9; \
	VANDPD      Y9, Y12, Y12; \
	VCVTTPD2DQY Y8, OUT

// CELLS: the 8 cells of axis values V (XV its low half) by the rule at
// K(DX), as uint16 in X10.
#define CELLS(V, XV, K) \
	VCVTPS2PD    XV, Y6; \
	VEXTRACTF128 $1, V, X7; \
	VCVTPS2PD    X7, Y7; \
	HALF(Y6, X10, K); \
	HALF(Y7, X11, K); \
	VPACKUSDW    X11, X10, X10

// RULE: axis A's cellRule (s, inv, k0, last, p, off: 48 bytes at
// A*48(AX)) broadcast into the frame at A*192(SP) in HALF's order.
#define RULE(A) \
	VBROADCASTSD (A*48+8)(AX), Y0; \
	VMOVUPD      Y0, (A*192)(SP); \
	VBROADCASTSD (A*48+16)(AX), Y0; \
	VMOVUPD      Y0, (A*192+32)(SP); \
	VBROADCASTSD (A*48+24)(AX), Y0; \
	VMOVUPD      Y0, (A*192+64)(SP); \
	VBROADCASTSD (A*48)(AX), Y0; \
	VMOVUPD      Y0, (A*192+96)(SP); \
	VBROADCASTSD (A*48+40)(AX), Y0; \
	VMOVUPD      Y0, (A*192+128)(SP); \
	VBROADCASTSD (A*48+32)(AX), Y0; \
	VMOVUPD      Y0, (A*192+160)(SP)

// func cells3AVX2(d, out []byte, stride, w int, r *[3]cellRule) (done int)
//
// The steps of cells3: 8 rows of d at a time, each axis's cells written
// to its plane of out (axis a at out[a·stride+i·w:], w bytes a cell, 1 or
// 2), until a step with a value whose first try does not decode within p
// (its cells are written, and the caller writes them again). Done: the
// rows of the whole steps that passed.
//
// Registers: SI the step's rows, CX bytes left, DI plane 0 at the step,
// R8 stride, R10 2·stride, R9 w, BX rows done, DX the rules in the frame;
// Y12 the step's verdicts, Y13 zero, Y14 the magnitude mask. (Y15 is left
// alone: Go's internal ABI keeps X15 zero.)
TEXT ·cells3AVX2(SB), 0, $576-80
	MOVQ d_base+0(FP), SI
	MOVQ d_len+8(FP), CX
	MOVQ out_base+24(FP), DI
	MOVQ stride+48(FP), R8
	MOVQ w+56(FP), R9
	MOVQ r+64(FP), AX
	RULE(0)
	RULE(1)
	RULE(2)
	LEAQ (SP), DX
	LEAQ (R8)(R8*1), R10
	XORQ BX, BX
	VXORPD  Y13, Y13, Y13
	VMOVDQU quantLanes<>+128(SB), Y14
	CMPQ R9, $1
	JEQ  bytes

words:
	CMPQ CX, $96
	JB   done
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	SPLIT(Y0, Y1, Y2, Y3, Y4, Y5, Y6)
	VPCMPEQD Y12, Y12, Y12
	CELLS(Y3, X3, 0)
	VMOVDQU  X10, (DI)
	CELLS(Y4, X4, 192)
	VMOVDQU  X10, (DI)(R8*1)
	CELLS(Y5, X5, 384)
	VMOVDQU  X10, (DI)(R10*1)
	VMOVMSKPD Y12, AX
	CMPL AX, $15
	JNE  done
	ADDQ $96, SI
	SUBQ $96, CX
	ADDQ $16, DI
	ADDQ $8, BX
	JMP  words

bytes:
	CMPQ CX, $96
	JB   done
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	SPLIT(Y0, Y1, Y2, Y3, Y4, Y5, Y6)
	VPCMPEQD Y12, Y12, Y12
	CELLS(Y3, X3, 0)
	VPACKUSWB X10, X10, X10
	VMOVQ     X10, (DI)
	CELLS(Y4, X4, 192)
	VPACKUSWB X10, X10, X10
	VMOVQ     X10, (DI)(R8*1)
	CELLS(Y5, X5, 384)
	VPACKUSWB X10, X10, X10
	VMOVQ     X10, (DI)(R10*1)
	VMOVMSKPD Y12, AX
	CMPL AX, $15
	JNE  done
	ADDQ $96, SI
	SUBQ $96, CX
	ADDQ $8, DI
	ADDQ $8, BX
	JMP  bytes

done:
	VZEROUPPER
	MOVQ BX, done+72(FP)
	RET

// FOLD: the 8 lanes of V folded by OP (VMINPS or VMAXPS) into lane 0 of
// XV; XT is scratch.
#define FOLD(OP, V, XV, XT) \
	VEXTRACTF128 $1, V, XT; \
	OP           XT, XV, XV; \
	VMOVHLPS     XV, XV, XT; \
	OP           XT, XV, XV; \
	VPSHUFD      $1, XV, XT; \
	OP           XT, XV, XV

// func bounds3AVX2(d []byte, b *[6]float32) (steps int, bad bool)
//
// The steps of bounds3: the smallest values of each axis over d's whole
// steps of 8 rows into b[0:3], the largest into b[3:6], and whether any
// value's exponent bits are all set (NaN, ±Inf: then b is not written).
// Steps: how many. The loop keeps each lane's bounds (value e of a step,
// axis e%3, in lane e%8 of load e/8); SPLIT then sorts them by axis.
TEXT ·bounds3AVX2(SB), NOSPLIT, $0-41
	MOVQ d_base+0(FP), SI
	MOVQ d_len+8(FP), CX
	MOVQ b+24(FP), DI
	XORQ BX, BX
	MOVB $0, bad+40(FP)
	CMPQ CX, $96
	JB   none
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVAPS Y0, Y3
	VMOVAPS Y1, Y4
	VMOVAPS Y2, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	VMOVAPS Y2, Y8
	VPXOR   Y9, Y9, Y9
	VMOVDQU quantLanes<>+96(SB), Y10

step:
	VANDPS   Y10, Y0, Y11
	VPCMPEQD Y10, Y11, Y11
	VPOR     Y11, Y9, Y9
	VANDPS   Y10, Y1, Y11
	VPCMPEQD Y10, Y11, Y11
	VPOR     Y11, Y9, Y9
	VANDPS   Y10, Y2, Y11
	VPCMPEQD Y10, Y11, Y11
	VPOR     Y11, Y9, Y9
	VMINPS   Y0, Y3, Y3
	VMINPS   Y1, Y4, Y4
	VMINPS   Y2, Y5, Y5
	VMAXPS   Y0, Y6, Y6
	VMAXPS   Y1, Y7, Y7
	VMAXPS   Y2, Y8, Y8
	ADDQ $96, SI
	SUBQ $96, CX
	INCQ BX
	CMPQ CX, $96
	JB   end
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	JMP  step

end:
	VPTEST Y9, Y9
	JNE    nonfinite
	SPLIT(Y3, Y4, Y5, Y0, Y1, Y2, Y11)
	FOLD(VMINPS, Y0, X0, X11)
	FOLD(VMINPS, Y1, X1, X11)
	FOLD(VMINPS, Y2, X2, X11)
	VMOVSS X0, (DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	SPLIT(Y6, Y7, Y8, Y0, Y1, Y2, Y11)
	FOLD(VMAXPS, Y0, X0, X11)
	FOLD(VMAXPS, Y1, X1, X11)
	FOLD(VMAXPS, Y2, X2, X11)
	VMOVSS X0, 12(DI)
	VMOVSS X1, 16(DI)
	VMOVSS X2, 20(DI)
	VZEROUPPER
	MOVQ BX, steps+32(FP)
	RET

nonfinite:
	MOVB $1, bad+40(FP)
	VZEROUPPER
	MOVQ BX, steps+32(FP)
	RET

none:
	MOVQ $0, steps+32(FP)
	RET
