"""Julia 1.10.5's own scalar math, reimplemented in Numba, bit for bit.

PositionalEmbeddings.jl builds its tables with Julia's ``sin``, ``cos`` and
``^``, which are Julia's own code, not the C library's: for one to three
arguments in a hundred they round differently (``docs/julia.md``).  Bit
parity needs the same algorithms, followed step by step, from the Julia
sources at the v1.10.5 tag (newer versions changed some of them):

- ``sincos_f32``: ``sin(::Float32)``, ``cos(::Float32)`` in
  ``base/special/trig.jl`` with ``rem_pio2_kernel(::Float32)`` in
  ``base/special/rem_pio2.jl``: the reduction and short polynomials run in
  Float64, with one rounding to Float32 at the end.
- ``sincos_f64``: ``sin(::Float64)``, ``cos(::Float64)`` (the FDLIBM
  kernels, with double-double arguments), ``rem_pio2_kernel(::Float64)``
  (Cody-Waite with two or three constants, then Payne-Hanek above
  2^20·π/2); below that, branch-free (``sincos_f64_moderate``), as
  ``sincos_f32`` is below Float32(π·2^27).
- ``pow_f64``: ``^(::Float64, ::Float64)`` in ``base/math.jl``
  (``pow_body``, with ``_log_ext`` from ``base/special/log.jl`` and
  ``exp_impl`` from ``base/special/exp.jl``), and its integer-exponent
  branch.

Julia's ``muladd`` (including every ``@horner``/``evalpoly`` step) is a fused
multiply-add on CPUs with FMA (every x86-64-v3 and ARM64 CPU, and the one the
fixtures were recorded on), so it is ``fma`` here; every other ``a*b + c``
is two roundings, as in Julia.  The constants and tables are Julia's (they
are facts of the algorithms); the code is written anew for Numba.

Where Julia throws ``DomainError`` (``sin``/``cos`` of an infinity, a
negative base with a fractional exponent), these return NaN: callers check
the domain first.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ._jit import JIT, JIT_LLVM_INLINED

__all__ = [
    "f32_bits",
    "f32_from_bits",
    "fma",
    "moderate_f32",
    "moderate_f64",
    "pow_f64",
    "sincos_f32",
    "sincos_f32_moderate",
    "sincos_f64",
    "sincos_f64_moderate",
]


@intrinsic
def fma(typingctx, a, b, c):  # type: ignore[no-untyped-def]
    """``a*b + c`` with one rounding (LLVM's ``llvm.fma.f64``)."""
    signature = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        double = ir.DoubleType()
        signature = ir.FunctionType(double, [double, double, double])
        function = builder.module.declare_intrinsic("llvm.fma", [double], signature)
        return builder.call(function, args)

    return signature, codegen


def _bitcast(source: types.Type, target: types.Type) -> Any:
    """An intrinsic that reinterprets a ``source`` scalar's bits as ``target``
    (Julia's ``reinterpret``)."""

    @intrinsic
    def reinterpret(typingctx, value):  # type: ignore[no-untyped-def]
        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return reinterpret


_bits = _bitcast(types.float64, types.int64)
_float = _bitcast(types.int64, types.float64)
f32_bits = _bitcast(types.float32, types.uint32)
f32_from_bits = _bitcast(types.uint32, types.float32)


# --- tables (Julia's, as data) -----------------------------------------------------------

_EXP_TABLE = np.array(
    [
        0x0000000000000000,
        0xAAC00B1AFA5ABCBE,
        0x9B60163DA9FB3335,
        0xAB502168143B0280,
        0xADC02C9A3E778060,
        0x656037D42E11BBCC,
        0xA7A04315E86E7F84,
        0x84C04E5F72F654B1,
        0x8D7059B0D3158574,
        0xA510650A0E3C1F88,
        0xA8D0706B29DDF6DD,
        0x83207BD42B72A836,
        0x6180874518759BC8,
        0xA4B092BDF66607DF,
        0x91409E3ECAC6F383,
        0x85D0A9C79B1F3919,
        0x98A0B5586CF9890F,
        0x94F0C0F145E46C85,
        0x9010CC922B7247F7,
        0xA210D83B23395DEB,
        0x4030E3EC32D3D1A2,
        0xA5B0EFA55FDFA9C4,
        0xAE40FB66AFFED31A,
        0x8D41073028D7233E,
        0xA4911301D0125B50,
        0xA1A11EDBAB5E2AB5,
        0xAF712ABDC06C31CB,
        0xAE8136A814F204AA,
        0xA661429AAEA92DDF,
        0xA9114E95934F312D,
        0x82415A98C8A58E51,
        0x58F166A45471C3C2,
        0xAB9172B83C7D517A,
        0x70917ED48695BBC0,
        0xA7718AF9388C8DE9,
        0x94A1972658375D2F,
        0x8E51A35BEB6FCB75,
        0x97B1AF99F8138A1C,
        0xA351BBE084045CD3,
        0x9001C82F95281C6B,
        0x9E01D4873168B9AA,
        0xA481E0E75EB44026,
        0xA711ED5022FCD91C,
        0xA201F9C18438CE4C,
        0x8DC2063B88628CD6,
        0x935212BE3578A819,
        0x82A21F49917DDC96,
        0x8D322BDDA27912D1,
        0x99B2387A6E756238,
        0x8AC2451FFB82140A,
        0x8AC251CE4FB2A63F,
        0x93E25E85711ECE75,
        0x82B26B4565E27CDD,
        0x9E02780E341DDF29,
        0xA2D284DFE1F56380,
        0xAB4291BA7591BB6F,
        0x86129E9DF51FDEE1,
        0xA352AB8A66D10F12,
        0xAFB2B87FD0DAD98F,
        0xA572C57E39771B2E,
        0x9002D285A6E4030B,
        0x9D12DF961F641589,
        0x71C2ECAFA93E2F56,
        0xAEA2F9D24ABD886A,
        0x86F306FE0A31B715,
        0x89531432EDEEB2FD,
        0x8A932170FC4CD831,
        0xA1D32EB83BA8EA31,
        0x93233C08B26416FF,
        0xAB23496266E3FA2C,
        0xA92356C55F929FF0,
        0xA8F36431A2DE883A,
        0xA4E371A7373AA9CA,
        0xA3037F26231E7549,
        0xA0B38CAE6D05D865,
        0xA3239A401B7140EE,
        0xAD43A7DB34E59FF6,
        0x9543B57FBFEC6CF4,
        0xA083C32DC313A8E4,
        0x7FE3D0E544EDE173,
        0x8AD3DEA64C123422,
        0xA943EC70DF1C5174,
        0xA413FA4504AC801B,
        0x8BD40822C367A024,
        0xAF04160A21F72E29,
        0xA3D423FB27094689,
        0xAB8431F5D950A896,
        0x88843FFA3F84B9D4,
        0x48944E086061892D,
        0xAE745C2042A7D231,
        0x9C946A41ED1D0057,
        0xA1E4786D668B3236,
        0x73C486A2B5C13CD0,
        0xAB1494E1E192AED1,
        0x99C4A32AF0D7D3DE,
        0xABB4B17DEA6DB7D6,
        0x7D44BFDAD5362A27,
        0x9054CE41B817C114,
        0x98E4DCB299FDDD0D,
        0xA564EB2D81D8ABFE,
        0xA5A4F9B2769D2CA6,
        0x7A2508417F4531EE,
        0xA82516DAA2CF6641,
        0xAC65257DE83F4EEE,
        0xABE5342B569D4F81,
        0x879542E2F4F6AD27,
        0xA8A551A4CA5D920E,
        0xA7856070DDE910D1,
        0x99B56F4736B527DA,
        0xA7A57E27DBE2C4CE,
        0x82958D12D497C7FD,
        0xA4059C0827FF07CB,
        0x9635AB07DD485429,
        0xA245BA11FBA87A02,
        0x3C45C9268A5946B7,
        0xA195D84590998B92,
        0x9BA5E76F15AD2148,
        0xA985F6A320DCEB70,
        0xA60605E1B976DC08,
        0x9E46152AE6CDF6F4,
        0xA636247EB03A5584,
        0x984633DD1D1929FD,
        0xA8E6434634CCC31F,
        0xA28652B9FEBC8FB6,
        0xA226623882552224,
        0xA85671C1C70833F5,
        0x60368155D44CA973,
        0x880690F4B19E9538,
        0xA216A09E667F3BCC,
        0x7A36B052FA75173E,
        0xADA6C012750BDABE,
        0x9C76CFDCDDD47645,
        0xAE46DFB23C651A2E,
        0xA7A6EF9298593AE4,
        0xA9F6FF7DF9519483,
        0x59D70F7466F42E87,
        0xABA71F75E8EC5F73,
        0xA6F72F8286EAD089,
        0xA7A73F9A48A58173,
        0x90474FBD35D7CBFD,
        0xA7E75FEB564267C8,
        0x9B777024B1AB6E09,
        0x986780694FDE5D3F,
        0x934790B938AC1CF6,
        0xAAF7A11473EB0186,
        0xA207B17B0976CFDA,
        0x9F17C1ED0130C132,
        0x91B7D26A62FF86F0,
        0x7057E2F336CF4E62,
        0xABE7F3878491C490,
        0xA6C80427543E1A11,
        0x946814D2ADD106D9,
        0xA1582589994CCE12,
        0x9998364C1EB941F7,
        0xA9C8471A4623C7AC,
        0xAF2857F4179F5B20,
        0xA01868D99B4492EC,
        0x85D879CAD931A436,
        0x99988AC7D98A6699,
        0x9D589BD0A478580F,
        0x96E8ACE5422AA0DB,
        0x9EC8BE05BAD61778,
        0xADE8CF3216B5448B,
        0xA478E06A5E0866D8,
        0x85C8F1AE99157736,
        0x959902FED0282C8A,
        0xA119145B0B91FFC5,
        0xAB2925C353AA2FE1,
        0xAE893737B0CDC5E4,
        0xA88948B82B5F98E4,
        0xAD395A44CBC8520E,
        0xAF296BDD9A7670B2,
        0xA1797D829FDE4E4F,
        0x7CA98F33E47A22A2,
        0xA749A0F170CA07B9,
        0xA119B2BB4D53FE0C,
        0x7C79C49182A3F090,
        0xA579D674194BB8D4,
        0x7829E86319E32323,
        0xAAD9FA5E8D07F29D,
        0xA65A0C667B5DE564,
        0x9C6A1E7AED8EB8BB,
        0x963A309BEC4A2D33,
        0xA2AA42C980460AD7,
        0xA16A5503B23E255C,
        0x650A674A8AF46052,
        0x9BCA799E1330B358,
        0xA58A8BFE53C12E58,
        0x90FA9E6B5579FDBF,
        0x889AB0E521356EBA,
        0xA81AC36BBFD3F379,
        0x97EAD5FF3A3C2774,
        0x97AAE89F995AD3AD,
        0xA5AAFB4CE622F2FE,
        0xA21B0E07298DB665,
        0x94DB20CE6C9A8952,
        0xAEDB33A2B84F15FA,
        0xAC1B468415B749B0,
        0xA1CB59728DE55939,
        0x92AB6C6E29F1C52A,
        0xAD5B7F76F2FB5E46,
        0xA24B928CF22749E3,
        0xA08BA5B030A10649,
        0xAFCBB8E0B79A6F1E,
        0x823BCC1E904BC1D2,
        0xAFCBDF69C3F3A206,
        0xA08BF2C25BD71E08,
        0xA89C06286141B33C,
        0x811C199BDD85529C,
        0xA48C2D1CD9FA652B,
        0x9B4C40AB5FFFD07A,
        0x912C544778FAFB22,
        0x928C67F12E57D14B,
        0xA86C7BA88988C932,
        0x71AC8F6D9406E7B5,
        0xAA0CA3405751C4DA,
        0x750CB720DCEF9069,
        0xAC5CCB0F2E6D1674,
        0xA88CDF0B555DC3F9,
        0xA2FCF3155B5BAB73,
        0xA1AD072D4A07897B,
        0x955D1B532B08C968,
        0xA15D2F87080D89F1,
        0x93DD43C8EACAA1D6,
        0x82ED5818DCFBA487,
        0x5FED6C76E862E6D3,
        0xA77D80E316C98397,
        0x9A0D955D71FF6075,
        0x9C2DA9E603DB3285,
        0xA24DBE7CD63A8314,
        0x92DDD321F301B460,
        0xA1ADE7D5641C0657,
        0xA72DFC97337B9B5E,
        0xADAE11676B197D16,
        0xA42E264614F5A128,
        0xA30E3B333B16EE11,
        0x839E502EE78B3FF6,
        0xAA7E653924676D75,
        0x92DE7A51FBC74C83,
        0xA77E8F7977CDB73F,
        0xA0BEA4AFA2A490D9,
        0x948EB9F4867CCA6E,
        0xA1BECF482D8E67F0,
        0x91CEE4AAA2188510,
        0x9DCEFA1BEE615A27,
        0xA66F0F9C1CB64129,
        0x93AF252B376BBA97,
        0xACDF3AC948DD7273,
        0x99DF50765B6E4540,
        0x9FAF6632798844F8,
        0xA12F7BFDAD9CBE13,
        0xAEEF91D802243C88,
        0x874FA7C1819E90D8,
        0xACDFBDBA3692D513,
        0x62EFD3C22B8F71F1,
        0x74AFE9D96B2A23D9,
    ],
    dtype=np.uint64,
)
_LOG_TABLE_BITS = np.array(
    [
        0xBFD62C82F2B9C8B5,
        0xBFD5D1BDBF5808B4,
        0xBFD57677174558B3,
        0xBFD51AAD872DF8B2,
        0xBFD4BE5F957778B1,
        0xBFD4618BC21C60B0,
        0xBFD404308686A8AF,
        0xBFD3A64C556948AE,
        0xBFD347DD9A9880AD,
        0xBFD2E8E2BAE120AC,
        0xBFD2895A13DE88AB,
        0xBFD2895A13DE88AB,
        0xBFD22941FBCF78AA,
        0xBFD1C898C16998A9,
        0xBFD1675CABABA8A8,
        0xBFD1058BF9AE48A7,
        0xBFD0A324E27390A6,
        0xBFD0402594B4D0A5,
        0xBFD0402594B4D0A5,
        0xBFCFB9186D5E40A4,
        0xBFCEF0ADCBDC60A3,
        0xBFCE27076E2AF0A2,
        0xBFCD5C216B4FC0A1,
        0xBFCC8FF7C79AA0A0,
        0xBFCC8FF7C79AA0A0,
        0xBFCBC286742D909F,
        0xBFCAF3C94E80C09E,
        0xBFCA23BC1FE2B09D,
        0xBFCA23BC1FE2B09D,
        0xBFC9525A9CF4509C,
        0xBFC87FA06520D09B,
        0xBFC7AB890210E09A,
        0xBFC7AB890210E09A,
        0xBFC6D60FE719D099,
        0xBFC5FF3070A79098,
        0xBFC5FF3070A79098,
        0xBFC526E5E3A1B097,
        0xBFC44D2B6CCB8096,
        0xBFC44D2B6CCB8096,
        0xBFC371FC201E9095,
        0xBFC29552F81FF094,
        0xBFC1B72AD52F6093,
        0xBFC1B72AD52F6093,
        0xBFC0D77E7CD09092,
        0xBFC0D77E7CD09092,
        0xBFBFEC9131DBE091,
        0xBFBE27076E2B0090,
        0xBFBE27076E2B0090,
        0xBFBC5E548F5BC08F,
        0xBFBA926D3A4AE08E,
        0xBFBA926D3A4AE08E,
        0xBFB8C345D631A08D,
        0xBFB8C345D631A08D,
        0xBFB6F0D28AE5608C,
        0xBFB51B073F06208B,
        0xBFB51B073F06208B,
        0xBFB341D7961BE08A,
        0xBFB341D7961BE08A,
        0xBFB16536EEA38089,
        0xBFAF0A30C0118088,
        0xBFAF0A30C0118088,
        0xBFAB42DD71198087,
        0xBFAB42DD71198087,
        0xBFA77458F632C086,
        0xBFA77458F632C086,
        0xBFA39E87B9FEC085,
        0xBFA39E87B9FEC085,
        0xBF9F829B0E780084,
        0xBF9F829B0E780084,
        0xBF97B91B07D58083,
        0xBF8FC0A8B0FC0082,
        0xBF8FC0A8B0FC0082,
        0xBF7FE02A6B100081,
        0xBF7FE02A6B100081,
        0x0000000000000080,
        0x0000000000000080,
        0x3F8010157589007E,
        0x3F9020565893807C,
        0x3F98492528C9007A,
        0x3FA0415D89E74078,
        0x3FA466AED42E0076,
        0x3FA894AA149FC074,
        0x3FACCB73CDDDC072,
        0x3FAEEA31C006C071,
        0x3FB1973BD146606F,
        0x3FB3BDF5A7D1E06D,
        0x3FB5E95A4D97A06B,
        0x3FB700D30AEAC06A,
        0x3FB9335E5D594068,
        0x3FBB6AC88DAD6066,
        0x3FBC885801BC4065,
        0x3FBEC739830A2063,
        0x3FBFE89139DBE062,
        0x3FC1178E8227E060,
        0x3FC1AA2B7E23F05F,
        0x3FC2D1610C86805D,
        0x3FC365FCB015905C,
        0x3FC4913D8333B05A,
        0x3FC527E5E4A1B059,
        0x3FC6574EBE8C1057,
        0x3FC6F0128B757056,
        0x3FC7898D85445055,
        0x3FC8BEAFEB390053,
        0x3FC95A5ADCF70052,
        0x3FCA93ED3C8AE050,
        0x3FCB31D8575BD04F,
        0x3FCBD087383BE04E,
        0x3FCC6FFBC6F0104D,
        0x3FCDB13DB0D4904B,
        0x3FCE530EFFE7104A,
        0x3FCEF5ADE4DD0049,
        0x3FCF991C6CB3B048,
        0x3FD07138604D5846,
        0x3FD0C42D67616045,
        0x3FD1178E8227E844,
        0x3FD16B5CCBACF843,
        0x3FD1BF99635A6842,
        0x3FD214456D0EB841,
        0x3FD2BEF07CDC903F,
        0x3FD314F1E1D3603E,
        0x3FD36B6776BE103D,
        0x3FD3C2527733303C,
        0x3FD419B423D5E83B,
        0x3FD4718DC271C83A,
        0x3FD4C9E09E173039,
        0x3FD522AE0738A038,
        0x3FD57BF753C8D037,
        0x3FD5D5BDDF596036,
    ],
    dtype=np.uint64,
)
_LOG_TABLE_TAIL = np.array(
    [
        5.929407345889625e-15,
        -2.544157440035963e-14,
        -3.443525940775045e-14,
        -2.500123826022799e-15,
        -8.929337133850617e-15,
        1.7625431312172662e-14,
        1.5688303180062087e-15,
        2.9655274673691784e-14,
        3.7923164802093147e-14,
        3.993416384387844e-14,
        1.9352855826489123e-14,
        1.9352855826489123e-14,
        -1.9852665484979036e-14,
        -2.814323765595281e-14,
        2.7643769993528702e-14,
        -4.025092402293806e-14,
        -1.2621729398885316e-14,
        -3.600176732637335e-15,
        -3.600176732637335e-15,
        1.3029797173308663e-14,
        4.8230289429940886e-14,
        -2.0592242769647135e-14,
        3.149265065191484e-14,
        4.169796584527195e-14,
        4.169796584527195e-14,
        2.2477465222466186e-14,
        3.6507188831790577e-16,
        -3.827767260205414e-14,
        -3.827767260205414e-14,
        -4.7641388950792196e-14,
        4.9278276214647115e-14,
        4.9485167661250996e-14,
        4.9485167661250996e-14,
        -1.5003333854266542e-14,
        -2.7194441649495324e-14,
        -2.7194441649495324e-14,
        -2.99659267292569e-14,
        2.0472357800461955e-14,
        2.0472357800461955e-14,
        3.879296723063646e-15,
        -3.6506824353335045e-14,
        -5.4183331379008994e-14,
        -5.4183331379008994e-14,
        1.1729485484531301e-14,
        1.1729485484531301e-14,
        -3.811763084710266e-14,
        4.654729747598445e-14,
        4.654729747598445e-14,
        -2.5799991283069902e-14,
        3.7700471749674615e-14,
        3.7700471749674615e-14,
        1.7306161136093256e-14,
        1.7306161136093256e-14,
        -4.012913552726574e-14,
        2.7541708360737882e-14,
        2.7541708360737882e-14,
        5.0396178134370583e-14,
        5.0396178134370583e-14,
        1.8195060030168815e-14,
        5.213620639136504e-14,
        5.213620639136504e-14,
        2.532168943117445e-14,
        2.532168943117445e-14,
        -5.148849572685811e-14,
        -5.148849572685811e-14,
        4.6652946995830086e-15,
        4.6652946995830086e-15,
        -4.529814257790929e-14,
        -4.529814257790929e-14,
        -4.361324067851568e-14,
        -1.7274567499706107e-15,
        -1.7274567499706107e-15,
        -2.298941004620351e-14,
        -2.298941004620351e-14,
        0.0,
        0.0,
        -1.4902732911301337e-14,
        -3.527980389655325e-14,
        -4.730054772033249e-14,
        7.580310369375161e-15,
        -4.9893776716773285e-14,
        -2.262629393030674e-14,
        -2.345674491018699e-14,
        -1.3352588834854848e-14,
        -3.765296820388875e-14,
        5.1128335719851986e-14,
        -5.046674438470119e-14,
        3.1218748807418837e-15,
        3.3871241029241416e-14,
        -1.7376727386423858e-14,
        3.957125899799804e-14,
        -5.2849453521890294e-14,
        -3.767012502308738e-14,
        3.1859736349078334e-14,
        5.0900642926060466e-14,
        8.710783796122478e-15,
        6.157896229122976e-16,
        3.821577743916796e-14,
        3.9440046718453496e-14,
        2.2924522154618074e-14,
        -3.742530094732263e-14,
        -2.5223102140407338e-14,
        -1.0320443688698849e-14,
        1.0634128304268335e-14,
        -4.3425422595242564e-14,
        -1.2527395755711364e-14,
        -5.204008743405884e-14,
        -3.979844515951702e-15,
        -4.7955860343296286e-14,
        5.015686013791602e-16,
        -7.252318953240293e-16,
        2.4688324156011588e-14,
        5.465121253624792e-15,
        4.102651071698446e-14,
        -4.996736502345936e-14,
        4.903580708156347e-14,
        5.089628039500759e-14,
        1.1782016386565151e-14,
        4.727452940514406e-14,
        -4.4204083338755686e-14,
        1.548345993498083e-14,
        2.1522127491642888e-14,
        1.1054030169005386e-14,
        -5.534326352070679e-14,
        -5.351646604259541e-14,
        5.4612144489920215e-14,
        2.8136969901227338e-14,
        -1.156568624616423e-14,
    ]
)
_INV_2PI = np.array(
    [
        0x28BE60DB9391054A,
        0x7F09D5F47D4D3770,
        0x36D8A5664F10E410,
        0x7F9458EAF7AEF158,
        0x6DC91B8E909374B8,
        0x01924BBA82746487,
        0x3F877AC72C4A69CF,
        0xBA208D7D4BAED121,
        0x3A671C09AD17DF90,
        0x4E64758E60D4CE7D,
        0x272117E2EF7E4A0E,
        0xC7FE25FFF7816603,
        0xFBCBC462D6829B47,
        0xDB4D9FB3C9F2C26D,
        0xD3D18FD9A797FA8B,
        0x5D49EEB1FAF97C5E,
        0xCF41CE7DE294A4BA,
        0x9AFED7EC47E35742,
        0x1580CC11BF1EDAEA,
    ],
    dtype=np.uint64,
)
"""Bits of 1/(2π), 64 at a time (``INV_2PI`` in rem_pio2.jl)."""

_INV_2PI_SIGNED = _INV_2PI.view(np.int64)
_EXP_TABLE_SIGNED = _EXP_TABLE.view(np.int64)
_LOG_TABLE_SIGNED = _LOG_TABLE_BITS.view(np.int64)

# --- 128-bit unsigned integers, as (high, low) pairs of uint64 ----------------------------

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U32 = np.uint64(32)
_U64 = np.uint64(64)
_LOW32 = np.uint64(0xFFFFFFFF)


@numba.njit(**JIT)
def _mul_wide(a: int, b: int) -> tuple[int, int]:
    """The full 128-bit product of two uint64 (Julia's ``widemul``)."""
    a_lo, a_hi = a & _LOW32, a >> _U32
    b_lo, b_hi = b & _LOW32, b >> _U32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    middle = (p0 >> _U32) + (p1 & _LOW32) + (p2 & _LOW32)
    low = (p0 & _LOW32) | (middle << _U32)
    high = p3 + (p1 >> _U32) + (p2 >> _U32) + (middle >> _U32)
    return high, low


@numba.njit(**JIT)
def _add(ah: int, al: int, bh: int, bl: int) -> tuple[int, int]:
    low = al + bl
    return ah + bh + (_U1 if low < al else _U0), low


@numba.njit(**JIT)
def _negate(high: int, low: int) -> tuple[int, int]:
    return _add(~high, ~low, _U0, _U1)


@numba.njit(**JIT)
def _shift(high: int, low: int, count: int) -> tuple[int, int]:
    """Julia's ``x >> count`` on a UInt128: a negative count shifts left."""
    if count >= 128 or count <= -128:
        return _U0, _U0
    if count >= 64:
        return _U0, high >> np.uint64(count - 64)
    if count > 0:
        c = np.uint64(count)
        return high >> c, (low >> c) | (high << (_U64 - c))
    if count == 0:
        return high, low
    if count > -64:
        c = np.uint64(-count)
        return (high << c) | (low >> (_U64 - c)), low << c
    return low << np.uint64(-count - 64), _U0


@numba.njit(**JIT)
def _bit_length(high: int, low: int) -> int:
    """Julia's ``top_set_bit``: the position of the highest set bit (0 for zero)."""
    word, base = (high, 64) if high else (low, 0)
    length = 0
    while word:
        word >>= _U1
        length += 1
    return base + length


# --- argument reduction (rem_pio2.jl) ------------------------------------------------------


@numba.njit(**JIT)
def _from_fraction(high: int, low: int) -> tuple[float, float]:
    """Julia's ``fromfraction``: an Int128 fraction f/2^128 as a float64 pair."""
    if high == 0 and low == 0:
        return 0.0, 0.0
    negative = high >> np.uint64(63)
    sign = negative << np.uint64(63)
    if negative:
        high, low = _negate(high, low)
    n1 = _bit_length(high, low)
    m1 = _shift(high, low, n1 - 26)[1] << np.uint64(27)
    d1 = np.uint64(n1 - 128 + 1021) << np.uint64(52)
    z1 = _float(np.int64(sign | (d1 + m1)))
    mh, ml = _shift(_U0, m1, 53 - n1)
    rest_high, rest_low = _add(high, low, ~mh, ~ml)
    rest_high, rest_low = _add(rest_high, rest_low, _U0, _U1)
    if rest_high == 0 and rest_low == 0:
        return z1, 0.0
    n2 = _bit_length(rest_high, rest_low)
    m2 = _shift(rest_high, rest_low, n2 - 53)[1]
    d2 = np.uint64(n2 - 128 + 1021) << np.uint64(52)
    return z1, _float(np.int64(sign | (d2 + m2)))


@numba.njit(**JIT)
def _payne_hanek(x: float) -> tuple[int, float, float]:
    """Julia's ``paynehanek``: quadrant and remainder of a large x modulo π/2."""
    u = np.uint64(_bits(x))
    significand = (u & np.uint64(0x000FFFFFFFFFFFFF)) | (_U1 << np.uint64(52))
    k = np.int64((u & np.uint64(0x7FF0000000000000)) >> np.uint64(52)) - 1023 - 52
    index = k >> 6
    shift = k - (index << 6)
    table = _INV_2PI
    if shift == 0:
        a1, a2, a3 = table[index], table[index + 1], table[index + 2]
    else:
        s = np.uint64(shift)
        back = _U64 - s
        a1 = (_U0 if index < 0 else table[index] << s) | (table[index + 1] >> back)
        a2 = (table[index + 1] << s) | (table[index + 2] >> back)
        a3 = (table[index + 2] << s) | (table[index + 3] >> back)
    h2, l2 = _mul_wide(significand, a2)
    h3 = _mul_wide(significand, a3)[0]
    high, low = _add(significand * a1 + h2, l2, _U0, h3)
    if x < 0:
        high, low = _negate(high, low)
    quadrant = (np.int64(high >> np.uint64(61)) + 1) >> 1
    f_high = (high << np.uint64(2)) | (low >> np.uint64(62))
    z_hi, z_lo = _from_fraction(f_high, low << np.uint64(2))
    pio2 = 1.5707963267948966
    pio2_hi = 1.5707963407039642
    pio2_lo = -1.3909067614167116e-8
    y_hi = (z_hi + z_lo) * pio2
    y_lo = (((z_hi * pio2_hi - y_hi) + z_hi * pio2_lo) + z_lo * pio2_hi) + z_lo * pio2_lo
    return quadrant, y_hi, y_lo


@numba.njit(**JIT)
def _high_word(x: float) -> int:
    return (_bits(x) >> 32) & 0xFFFFFFFF


_PIO2_1 = 1.57079632673412561417e00
_PIO2_1T = 6.07710050650619224932e-11
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_2T = 2.02226624879595063154e-21
_PIO2_3 = 2.02226624871116645580e-21
_PIO2_3T = 8.47842766036889956997e-32
_F64_MODERATE = 0x413921FB
"""High word of 2^20·π/2: ``rem_pio2_kernel(::Float64)`` reduces smaller
magnitudes with Cody-Waite, larger ones with Payne-Hanek."""


@numba.njit(**JIT)
def _exponent_drop(j: int, y: float) -> int:
    """How far the biased exponent ``j`` of x lies above that of ``y``."""
    return j - ((_high_word(y) >> 20) & 0x7FF)


@numba.njit(**JIT)
def _cody_waite_next(fn: float, r: float, part: float, tail: float) -> tuple[float, float, float]:
    """One more two-part constant of ``cody_waite_ext_pio2``: ``(r, w, y1)``."""
    t = r
    w = fn * part
    r = t - w
    w = fma(fn, tail, -((t - r) - w))
    return r, w, r - w


@numba.njit(**JIT_LLVM_INLINED)
def _rem_pio2_f64_moderate(x: float) -> tuple[int, float, float]:
    """``rem_pio2_kernel(::Float64)`` for ``moderate_f64(x)``: (n, y_hi, y_lo)
    with x = n·π/2 + y, without branches.

    Julia picks by the high word of |x|: below ~9π/4,
    ``cody_waite_2c_pio2`` with n = ±1..±4 from thresholds (x near π/2, π,
    3π/2 and 2π excepted); above, and for those, ``cody_waite_ext_pio2``,
    which takes a second and a third two-part constant where the first
    leaves too few bits.  Both reductions, all three steps of the second,
    are computed and the result selected, so that a loop over many angles
    vectorises."""
    xhp = _high_word(x) & 0x7FFFFFFF
    k = 1.0 if xhp <= 0x4002D97C else 2.0 if xhp <= 0x400F6A7A else 3.0  # ~3π/4, ~5π/4
    k = k if xhp <= 0x4015FDBC else 4.0  # ~7π/4
    fn2 = k if x > 0.0 else -k
    z = fma(-fn2, _PIO2_1, x)
    hi2 = fma(-fn2, _PIO2_1T, z)
    lo2 = fma(-fn2, _PIO2_1T, z - hi2)
    # 0 where Julia does not reduce so, so that the conversion to an integer
    # below never meets an infinite, NaN or out-of-range value
    fn = np.rint(x * _TWO_OVER_PI) if xhp < _F64_MODERATE else 0.0
    r1 = fma(-fn, _PIO2_1, x)
    w1 = fn * _PIO2_1T
    y1 = r1 - w1
    r2, w2, y2 = _cody_waite_next(fn, r1, _PIO2_2, _PIO2_2T)
    r3, w3, y3 = _cody_waite_next(fn, r2, _PIO2_3, _PIO2_3T)
    j = xhp >> 20
    second = _exponent_drop(j, y1) > 16
    third = second & (_exponent_drop(j, y2) > 49)
    r = r3 if third else r2 if second else r1
    w = w3 if third else w2 if second else w1
    hi = y3 if third else y2 if second else y1
    lo = (r - hi) - w
    extended = (
        (xhp > 0x401C463B)
        | ((xhp <= 0x400F6A7A) & ((xhp & 0xFFFFF) == 0x921FB))  # |x| ~= π/2 or π
        | (xhp == 0x4012D97C)  # |x| ~= 3π/2
        | (xhp == 0x401921FB)  # |x| ~= 2π
    )
    n = np.int64(fn) if extended else np.int64(fn2)
    return n, (hi if extended else hi2), (lo if extended else lo2)


# --- kernels on [-π/4, π/4] (trig.jl) -------------------------------------------------------

_TWO_OVER_PI = 2 / math.pi
_PI_OVER_TWO = math.pi / 2
_F32_PI_2P27 = np.float32(math.pi * 2.0**27)  # Float32(pi*0x1p27)
_F32_PI_4 = np.float32(math.pi) / np.float32(4)  # T(pi)/4 in Float32 arithmetic
_F32_SIN_TINY = np.sqrt(np.finfo(np.float32).eps)  # sqrt(eps(Float32)), in Float32
_F32_COS_TINY = np.sqrt(np.finfo(np.float32).eps / np.float32(2))
_F64_PI_4 = math.pi / 4
_F64_SIN_TINY = math.sqrt(np.finfo(np.float64).eps)
_F64_COS_TINY = math.sqrt(np.finfo(np.float64).eps / 2)

_DS1 = -1.66666666666666324348e-01
_DS2 = 8.33333333332248946124e-03
_DS3 = -1.98412698298579493134e-04
_DS4 = 2.75573137070700676789e-06
_DS5 = -2.50507602534068634195e-08
_DS6 = 1.58969099521155010221e-10
_DC1 = 4.16666666666666019037e-02
_DC2 = -1.38888888888741095749e-03
_DC3 = 2.48015872894767294178e-05
_DC4 = -2.75573143513906633035e-07
_DC5 = 2.08757232129817482790e-09
_DC6 = -1.13596475577881948265e-11


@numba.njit(**JIT)
def _sin_kernel_f32(y: float) -> float:
    z = y * y
    w = z * z
    r = fma(z, 2.718311493989822e-6, -0.00019839334836096632)
    s = z * y
    return np.float32((y + s * fma(z, 0.008333329385889463, -0.16666666641626524)) + s * w * r)


@numba.njit(**JIT)
def _cos_kernel_f32(y: float) -> float:
    y2 = y * y
    y4 = y2 * y2
    r = fma(y2, 2.439044879627741e-5, -0.001388676377460993)
    return np.float32(((1.0 + y2 * -0.499999997251031) + y4 * 0.04166662332373906) + (y4 * y2) * r)


@numba.njit(**JIT)
def _sin_poly(y2: float) -> float:
    y4 = y2 * y2
    return fma(y2, fma(y2, _DS4, _DS3), _DS2) + y2 * y4 * fma(y2, _DS6, _DS5)


@numba.njit(**JIT)
def _cos_poly(y2: float) -> float:
    y4 = y2 * y2
    return y2 * fma(y2, fma(y2, _DC3, _DC2), _DC1) + y4 * y4 * fma(y2, fma(y2, _DC6, _DC5), _DC4)


@numba.njit(**JIT)
def _sin_kernel_f64(hi: float, lo: float) -> float:
    y2 = hi * hi
    r = _sin_poly(y2)
    y3 = y2 * hi
    return hi - ((y2 * (0.5 * lo - y3 * r) - lo) - y3 * _DS1)


@numba.njit(**JIT)
def _cos_kernel_f64(hi: float, lo: float) -> float:
    y2 = hi * hi
    r = _cos_poly(y2)
    half_y2 = 0.5 * y2
    w = 1.0 - half_y2
    return w + (((1.0 - w) - half_y2) + (y2 * r - hi * lo))


@numba.njit(**JIT)
def _sin_kernel_f64_single(y: float) -> float:
    y2 = y * y
    return y + (y2 * y) * (_DS1 + y2 * _sin_poly(y2))


@numba.njit(**JIT)
def _cos_kernel_f64_single(y: float) -> float:
    y2 = y * y
    r = _cos_poly(y2)
    half_y2 = 0.5 * y2
    w = 1.0 - half_y2
    return w + (((1.0 - w) - half_y2) + (y2 * r))


# --- sin and cos ------------------------------------------------------------------------


@numba.njit(**JIT)
def _by_quadrant(n, s, c):  # type: ignore[no-untyped-def]
    """``(sin, cos)`` of an angle ``n*pi/2 + y`` from ``s, c = sin(y), cos(y)``.

    Quadrant 0: ``(s, c)``, 1: ``(c, -s)``, 2: ``(-s, -c)``, 3: ``(-c, s)``,
    written as selects rather than a chain of branches: along a table row
    the quadrant of a fast frequency changes at almost every position, which
    a branch predictor cannot follow.
    """
    swap = (n & 1) != 0
    first = c if swap else s
    second = s if swap else c
    return (-first if n & 2 else first), (-second if (n + 1) & 2 else second)


@numba.njit(**JIT)
def moderate_f32(x: float) -> bool:
    """Whether ``sincos_f32_moderate`` gives Julia's sin and cos of the
    Float32 ``x``: ``|x| < Float32(π·2^27)``, below which
    ``rem_pio2_kernel(::Float32)`` reduces with two constants (not NaN)."""
    return abs(np.float32(x)) < _F32_PI_2P27


@numba.njit(**JIT)
def sincos_f32_moderate(x: float) -> tuple[float, float]:
    """``sincos_f32`` for a Float32 ``x`` where ``moderate_f32(x)``, without branches.

    Julia's small-angle cases (no reduction below π/4; ``x`` itself and 1
    below the tiny thresholds) are selects on one computation, so a loop over
    many angles vectorises: a column of RoPE's tables fills ~3.5x faster
    than with one branch per angle.  Other ``x`` (larger, infinite, NaN) give
    meaningless values, without undefined behaviour.
    """
    x = np.float32(x)
    absx = abs(x)
    xd = np.float64(x)
    fn = np.rint(xd * _TWO_OVER_PI) if _F32_PI_4 <= absx < _F32_PI_2P27 else 0.0
    y = fma(fn, -6.123233995736766e-17, fma(fn, -_PI_OVER_TWO, xd))  # y = x exactly for fn = 0
    s = x if absx < _F32_SIN_TINY else _sin_kernel_f32(y)
    c = np.float32(1.0) if absx < _F32_COS_TINY else _cos_kernel_f32(y)
    return _by_quadrant(np.int64(fn), s, c)


@numba.njit(**JIT)
def sincos_f32(x: float) -> tuple[float, float]:
    """Julia's ``(sin(x), cos(x))`` for a Float32 ``x``, each as Julia computes it alone.

    Returns float32 values; NaN for NaN or infinite ``x``.
    """
    x = np.float32(x)
    if moderate_f32(x):
        return sincos_f32_moderate(x)
    if not math.isfinite(x):
        return np.float32(np.nan), np.float32(np.nan)
    n, y, _ = _payne_hanek(np.float64(x))  # rem_pio2_kernel(::Float32) keeps y's high part
    return _by_quadrant(n, _sin_kernel_f32(y), _cos_kernel_f32(y))


@numba.njit(**JIT)
def moderate_f64(x: float) -> bool:
    """Whether ``sincos_f64_moderate`` gives Julia's sin and cos of ``x``:
    ``|x| < 2^20·π/2`` (not NaN), below which ``rem_pio2_kernel(::Float64)``
    reduces with Cody-Waite."""
    return (_high_word(x) & 0x7FFFFFFF) < _F64_MODERATE


@numba.njit(**JIT_LLVM_INLINED)
def sincos_f64_moderate(x: float) -> tuple[float, float]:
    """``sincos_f64`` for ``x`` where ``moderate_f64(x)``, without branches.

    No reduction below π/4 (``x`` itself and 1 below the tiny thresholds)
    and ``_rem_pio2_f64_moderate`` above are selects on computations made
    for every ``x``, so a loop over many angles vectorises (LLVM is told to
    paste it into each caller: left a call, the loop would not vectorise).
    A loop over angles took 10.3 ns an angle with branches and 1.9 ns
    without on the AMD EPYC (AVX-512) development machine; on two threads
    ``AbsolutePE(512, 65536)`` was built in 90 ms, now 24 ms, and float64
    ``RoPE(128, 131072)`` in 77 ms, now 17 ms.  Other ``x`` give values that
    need not be Julia's (NaN and infinities included), without undefined
    behaviour.
    """
    absx = abs(x)
    small = absx < _F64_PI_4
    s0 = x if absx < _F64_SIN_TINY else _sin_kernel_f64_single(x)
    c0 = 1.0 if absx < _F64_COS_TINY else _cos_kernel_f64_single(x)
    n, hi, lo = _rem_pio2_f64_moderate(x)
    s, c = _by_quadrant(n, _sin_kernel_f64(hi, lo), _cos_kernel_f64(hi, lo))
    return (s0 if small else s), (c0 if small else c)


@numba.njit(**JIT)
def sincos_f64(x: float) -> tuple[float, float]:
    """Julia's ``(sin(x), cos(x))`` for a Float64 ``x``, each as Julia computes it alone.

    NaN for NaN or infinite ``x``.
    """
    if moderate_f64(x):
        return sincos_f64_moderate(x)
    if not math.isfinite(x):
        return np.nan, np.nan
    n, hi, lo = _payne_hanek(x)
    return _by_quadrant(n, _sin_kernel_f64(hi, lo), _cos_kernel_f64(hi, lo))


# --- pow (math.jl, log.jl, exp.jl) ------------------------------------------------------

_LOG_POLY = tuple(
    float.fromhex(c)
    for c in (
        "-0x1.555555555556p-1",
        "0x1.0000000000006p-1",
        "-0x1.999999959554ep-2",
        "0x1.555555529a47ap-2",
        "-0x1.2495b9b4845e9p-2",
        "0x1.0002b8b263fc3p-2",
    )
)
_MAGIC_ROUND = 6.755399441055744e15  # MAGIC_ROUND_CONST(Float64)
_BIG_EXPONENT = float.fromhex("0x1.8p62")


@numba.njit(**JIT)
def _log_ext(xu: int) -> tuple[float, float]:
    """``_log_ext``: log(x) as hi + lo (about 68 bits) from x's bits ``xu``."""
    tmp = xu - 0x3FE6955500000000
    i = (tmp >> 45) & 127
    z = _float(xu - (tmp & np.int64(-0x10000000000000)))
    k = np.float64(tmp >> 52)
    t = _LOG_TABLE_SIGNED[i]
    inv_c = _float(((t & 0xFF) | 0x1FF00) << 45)
    log_c = _float(t & ~np.int64(0xFF))
    log_c_tail = _LOG_TABLE_TAIL[i]
    r = fma(z, inv_c, -1.0)
    t1 = fma(k, 0.6931471805598903, log_c)
    t2 = t1 + r
    lo1 = fma(k, 5.497923018708371e-14, log_c_tail)
    lo2 = t1 - t2 + r
    ar = -0.5 * r
    ar2 = r * ar
    lo3 = fma(r, ar, -ar2)
    hi = t2 + ar2
    lo4 = t2 - hi + ar2
    c0, c1, c2, c3, c4, c5 = _LOG_POLY
    p = fma(r, fma(r, fma(r, fma(r, fma(r, c5, c4), c3), c2), c1), c0)
    lo = lo1 + lo2 + lo3 + fma(r * ar2, p, lo4)
    return hi, lo


@numba.njit(**JIT)
def _exp_ext(x: float, xlo: float) -> float:
    """``exp_impl(x, xlo, Val(:ℯ))``: e^(x + xlo)."""
    n_float = fma(x, 369.3299304675746, _MAGIC_ROUND)
    n = np.int64(np.int32(_bits(n_float) & 0xFFFFFFFF))
    n_float -= _MAGIC_ROUND
    r = fma(n_float, -0.002707606173999011, x)
    r = fma(n_float, -6.327543041662719e-14, r)
    k = n >> 8
    j = _EXP_TABLE_SIGNED[n & 255]
    j_up = _float(0x3FF0000000000000 | (j & 0x000FFFFFFFFFFFFF))
    j_low = _float(0x3C00000000000000 | np.int64(np.uint64(j) >> np.uint64(8)))
    kern = r * fma(
        r,
        fma(r, fma(r, 0.04166666857598777, 0.1666666857598779), 0.4999999999999997),
        0.9999999999999912,
    )
    very_small = fma(kern, j_up * xlo, j_low)
    hi = 1.0 + kern
    lo = (1.0 - hi) + kern
    small_part = fma(j_up, hi, fma(j_up, lo + xlo, very_small))
    if not abs(x) <= 708.3964185322641:
        if x >= 709.7827128933841:
            return np.inf
        if x <= -745.1332191019412:
            return 0.0
        if k <= -53:
            return _float(((k + 53) << 52) + _bits(small_part)) * 2.0**-53
    return _float((k << 52) + _bits(small_part))


@numba.njit(**JIT)
def _two_mul(x: float, y: float) -> tuple[float, float]:
    xy = x * y
    return xy, fma(x, y, -xy)


@numba.njit(**JIT)
def _pow_integer(x: float, n: int) -> float:
    """``^(::Float64, ::Integer)``: compensated repeated squaring."""
    if n == 0:
        return 1.0
    y = 1.0
    xnlo = ynlo = 0.0
    if n == 3:
        return x * x * x
    if n < 0:
        rx = 1.0 / x
        if n == -2:
            return rx * rx
        if math.isfinite(x):
            xnlo = -fma(x, rx, -1.0) * rx
        x = rx
        n = -n
    while n > 1:
        if n & 1 > 0:
            err = fma(y, xnlo, x * ynlo)
            y, ynlo = _two_mul(x, y)
            ynlo += err
        err = x * 2 * xnlo
        x, xnlo = _two_mul(x, x)
        xnlo += err
        n >>= 1
    err = fma(y, xnlo, x * ynlo)
    if math.isfinite(x) and math.isfinite(err):
        return fma(x, y, err)
    return x * y


@numba.njit(**JIT)
def pow_f64(x: float, y: float) -> float:
    """Julia's ``x ^ y`` for Float64 (NaN where Julia throws ``DomainError``)."""
    xu = _bits(x)
    if xu == 0x3FF0000000000000:  # x == 1.0
        return 1.0
    if not abs(y) < _BIG_EXPONENT:
        if math.isnan(y):
            return y
        y = math.copysign(_BIG_EXPONENT, y)
    y_int = np.int64(y)
    if y == y_int:
        return _pow_integer(x, y_int)
    if x == 0.0:  # Julia: abs(y)*Inf*(!(y>0)), with false a strong zero
        return 0.0 if y > 0 else np.inf
    if x < 0:
        return np.nan
    if not math.isfinite(x):  # Julia: x*(y>0 || isnan(x)), with false a strong zero
        return x if (y > 0 or math.isnan(x)) else 0.0
    if xu < (1 << 52):  # subnormal: normalise
        xu = _bits(x * 2.0**52) & 0x7FFFFFFFFFFFFFFF
        xu -= 52 << 52
    log_hi, log_lo = _log_ext(xu)
    xy_hi, xy_lo = _two_mul(log_hi, y)
    xy_lo = fma(log_lo, y, xy_lo)
    hi = xy_hi + xy_lo
    return _exp_ext(hi, xy_lo - (hi - xy_hi))
