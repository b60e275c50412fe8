// Where the non-template functions of the public API are defined.
//
// The light headers (locost/api.hpp and the *_decl.hpp headers it includes) declare what a program
// that loads a checkpoint, encodes and generates calls; the heavy headers define it. Those
// definitions are LOCOST_API:
//  * header-only (LOCOST_COMPILED not set): `inline`, defined in every unit that includes the
//    heavy headers, as any header-only code;
//  * compiled (LOCOST_COMPILED=1, which locost::locost_compiled gives its users): defined once,
//    in the library (src/api.cpp, which sets LOCOST_DEFINING_API), and seen as declarations
//    everywhere else — so a unit that includes only the light headers parses none of the
//    loaders, parsers or tokenizers behind them and still links.
// LOCOST_API_DEFINITIONS says whether this unit compiles the definitions.
#pragma once

#if defined(LOCOST_COMPILED) && LOCOST_COMPILED
#define LOCOST_API
#if defined(LOCOST_DEFINING_API)
#define LOCOST_API_DEFINITIONS 1
#else
#define LOCOST_API_DEFINITIONS 0
#endif
#else
#define LOCOST_API inline
#define LOCOST_API_DEFINITIONS 1
#endif
