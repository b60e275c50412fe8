// T5 (models/t5) beyond the shared reference cases of tests/models/test_hf_parity.cpp: the tied
// head's scaling rule.
#include "models/hf_reference.hpp"

TEST_CASE("t5: v1.0's tied head is scaled, transformers 5's scale_decoder_outputs false is not") {
    // The same weights read with the other scaling rule must miss the references by far: the
    // parity of test_hf_parity.cpp is not an accident of the head.
    const reference ref(hf_dir + "/t5_v11/reference.safetensors");
    const batch in = encoder_batch(ref);
    const std::string dir = scratch_dir("t5_scaled");
    auto cfg = read_json(hf_dir + "/t5_v11/config.json");
    cfg["scale_decoder_outputs"] = true;
    std::ofstream(dir + "/config.json") << cfg.dump();
    auto m = models::load_model<float, cpu>(locost::io::checkpoint::open(hf_dir + "/t5_v11", dir + "/config.json"));
    const auto dec = ref.ints("dec.decoder_input_ids");
    const auto logits = m.score(in.ids.data(), in.mask.data(), in.B, in.L, dec.data(), ref.shape("dec.decoder_input_ids")[1]);
    CHECK(rel_error(logits.data(), ref.floats("dec.logits")) > 0.1);
}
