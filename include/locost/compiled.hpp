// The configurations the compiled library (locost::locost_compiled, CMake option LOCOST_COMPILED)
// holds compiled: every family's model and encoder, SLED over them, and generation, for
// <float, cpu> and <double, cpu> (the reference path).
//
// locost.hpp includes this header at its end. A translation unit that links locost_compiled gets
// LOCOST_COMPILED=1 from the target and sees these as explicit instantiation declarations
// (`extern template`): it instantiates none of the model code behind load_model(),
// load_encoder() and generate() for these types, and links the library's copies instead. The
// library's own sources (src/) expand the same lists as explicit instantiation definitions, so
// the two can never disagree. Other configurations (a scalar type, backend or structure of your
// own) are instantiated in the user's translation unit as in header-only use.
#pragma once

// (PREFIX, Scalar, Backend): the loaders of one configuration.
#define LOCOST_COMPILED_LOADERS(PREFIX, S, B)                                                                                              \
    PREFIX ::locost::models::any_encoder<S, B> locost::models::load_encoder<S, B>(const ::locost::io::checkpoint&,                         \
                                                                                  const ::locost::models::model_options&);                 \
    PREFIX ::locost::models::any_model<S, B> locost::models::load_model<S, B>(const ::locost::io::checkpoint&,                             \
                                                                              const ::locost::models::model_options&);

// (PREFIX, Scalar, Backend): decoding over one configuration's any_model.
#define LOCOST_COMPILED_GENERATION(PREFIX, S, B)                                                                                           \
    PREFIX ::locost::generation::generation_result locost::generation::generate<::locost::models::any_model<S, B>>(                        \
        const ::locost::models::any_model<S, B>&, const ::locost::models::any_model<S, B>::encoded&,                                       \
        const ::locost::generation::token_rows&, const ::locost::generation::generation_options&,                                          \
        const ::locost::generation::step_callback&);                                                                                       \
    PREFIX ::locost::generation::generation_result locost::generation::greedy_or_sample<::locost::models::any_model<S, B>>(                \
        const ::locost::models::any_model<S, B>&, const ::locost::models::any_model<S, B>::encoded&,                                       \
        const ::locost::generation::token_rows&, const ::locost::generation::generation_options&,                                          \
        const ::locost::generation::step_callback&);                                                                                       \
    PREFIX ::locost::generation::generation_result locost::generation::beam_search<::locost::models::any_model<S, B>>(                     \
        const ::locost::models::any_model<S, B>&, const ::locost::models::any_model<S, B>::encoded&,                                       \
        const ::locost::generation::token_rows&, const ::locost::generation::generation_options&,                                          \
        const ::locost::generation::step_callback&);                                                                                       \
    PREFIX ::locost::models::any_model<S, B>::encoded locost::models::encode_each<::locost::models::any_model<S, B>>(                      \
        ::locost::models::any_model<S, B>&, const std::vector<std::vector<std::int64_t>>&, const ::locost::models::progress_callback&);

#if defined(LOCOST_COMPILED) && LOCOST_COMPILED && !defined(LOCOST_INSTANTIATING)
LOCOST_COMPILED_LOADERS(extern template, float, ::locost::cpu)
LOCOST_COMPILED_LOADERS(extern template, double, ::locost::cpu)
LOCOST_COMPILED_GENERATION(extern template, float, ::locost::cpu)
LOCOST_COMPILED_GENERATION(extern template, double, ::locost::cpu)
#endif
