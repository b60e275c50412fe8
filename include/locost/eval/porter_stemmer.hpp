// The Porter stemmer as NLTK's PorterStemmer() computes it in its default mode, NLTK_EXTENSIONS
// (nltk/stem/porter.py, checked against NLTK 3.8): the stemmer Google's rouge-score builds when
// use_stemmer is true (rouge_score/tokenizers.py: porter.PorterStemmer()).
//
// The algorithm is Porter's (M. F. Porter, "An algorithm for suffix stripping", Program 14(3),
// 1980), in terms of his definitions:
//
//   consonant   a letter other than a, e, i, o, u, and other than a y that follows a consonant
//               (a y that starts the word is a consonant); any other byte counts as a consonant
//   m (measure) a stem read as [C](VC)^m[V], C a run of consonants and V a run of vowels:
//               the number of vowel-to-consonant changes
//   *v*         the stem has a vowel;  *d  it ends with a doubled consonant
//   *o          it ends consonant-vowel-consonant, the last not w, x or y
//
// and five steps run one after the other; within a rule list the first suffix that the word ends
// with decides: if its condition on the stem holds the suffix is replaced, and either way no later
// rule of that list is tried. The NLTK_EXTENSIONS mode differs from the 1980 paper by:
//   - a table of irregular words returned as they are listed (sky/skies -> sky, dying -> die,
//     lying -> lie, tying -> tie, news, inning(s) -> inning, outing(s) -> outing,
//     canning(s) -> canning, howe, proceed, exceed, succeed);
//   - words of one or two letters left alone;
//   - step 1a: a four-letter word in -ies loses only its s (dies -> die);
//   - step 1b: -ied becomes -ie in a four-letter word and -i otherwise, and ends the step;
//   - step 1b: *o also holds for a two-letter stem vowel-consonant (any consonant);
//   - step 1c: y -> i only after a consonant that is not the stem's first letter (happy -> happi,
//     enjoy and sky stay);
//   - step 2: -alli -> -al first (when m > 0) and step 2 again on the result; -bli -> -ble for
//     the paper's -abli -> -able; -fulli -> -ful; -logi -> -log when the stem with its l has m > 0.
//
// porter_stem expects a lowercase word (NLTK lowercases first; rouge-score only passes [a-z0-9]+).
// It costs a few passes over the word, without recursion, so any length is safe.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace locost::eval {

namespace detail {

// A word being stemmed, with its consonant/vowel pattern kept in step with its letters.
class porter_word {
public:
    explicit porter_word(std::string_view w) : text_(w) { classify(); }

    const std::string& text() const { return text_; }
    std::size_t size() const { return text_.size(); }
    bool ends_with(std::string_view suffix) const { return std::string_view(text_).ends_with(suffix); }

    // Replaces the last `drop` letters with `add`.
    void replace_tail(std::size_t drop, std::string_view add) {
        text_.resize(text_.size() - drop);
        text_ += add;
        classify();
    }

    // Porter's measure m of the first len letters.
    int measure(std::size_t len) const {
        int m = 0;
        for (std::size_t i = 1; i < len; ++i) m += !consonant_[i - 1] && consonant_[i];
        return m;
    }
    bool has_vowel(std::size_t len) const {
        for (std::size_t i = 0; i < len; ++i)
            if (!consonant_[i]) return true;
        return false;
    }
    // *d on the first len letters.
    bool ends_double_consonant(std::size_t len) const { return len >= 2 && text_[len - 1] == text_[len - 2] && consonant_[len - 1]; }
    // *o on the first len letters, with NLTK's two-letter case.
    bool ends_cvc(std::size_t len) const {
        if (len >= 3 && consonant_[len - 3] && !consonant_[len - 2] && consonant_[len - 1]) {
            const char last = text_[len - 1];
            if (last != 'w' && last != 'x' && last != 'y') return true;
        }
        return len == 2 && !consonant_[0] && consonant_[1];
    }
    bool consonant(std::size_t i) const { return consonant_[i]; }

private:
    static bool vowel_letter(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }
    // One pass from the left: a y takes the opposite of the letter before it.
    void classify() {
        consonant_.resize(text_.size());
        for (std::size_t i = 0; i < text_.size(); ++i) {
            const char c = text_[i];
            consonant_[i] = vowel_letter(c) ? false : (c == 'y' && i > 0 ? !consonant_[i - 1] : true);
        }
    }

    std::string text_;
    std::vector<char> consonant_;  // 1 where text_ has a consonant
};

// When a suffix rule may fire, judged on the stem left once the suffix is removed.
enum class porter_condition {
    m_above_0,     // (m > 0)
    m_above_1,     // (m > 1)
    m_above_1_st,  // (m > 1 and the stem ends with s or t): step 4's -ion
    logi,          // NLTK's -logi: m > 0 for the stem with the suffix's l kept
};

struct porter_rule {
    std::string_view suffix;
    std::string_view replacement;
    porter_condition condition;
};

// The first rule whose suffix ends the word decides; returns whether one matched.
template <std::size_t N>
bool porter_apply_first(porter_word& w, const porter_rule (&rules)[N]) {
    for (const porter_rule& r : rules) {
        if (!w.ends_with(r.suffix)) continue;
        const std::size_t stem = w.size() - r.suffix.size();
        bool holds = false;
        switch (r.condition) {
        case porter_condition::m_above_0: holds = w.measure(stem) > 0; break;
        case porter_condition::m_above_1: holds = w.measure(stem) > 1; break;
        case porter_condition::m_above_1_st: holds = w.measure(stem) > 1 && (w.text()[stem - 1] == 's' || w.text()[stem - 1] == 't'); break;
        case porter_condition::logi: holds = w.measure(stem + 1) > 0; break;
        }
        if (holds) w.replace_tail(r.suffix.size(), r.replacement);
        return true;
    }
    return false;
}

// Step 1a: plurals.
inline void porter_step1a(porter_word& w) {
    if (w.size() == 4 && w.ends_with("ies")) return w.replace_tail(1, "");  // NLTK: dies -> die
    if (w.ends_with("sses") || w.ends_with("ies")) return w.replace_tail(2, "");
    if (w.ends_with("ss")) return;
    if (w.ends_with("s")) w.replace_tail(1, "");
}

// Step 1b: -eed, -ed, -ing, and the tidying after -ed/-ing.
inline void porter_step1b(porter_word& w) {
    if (w.ends_with("ied")) return w.replace_tail(3, w.size() == 4 ? "ie" : "i");  // NLTK
    if (w.ends_with("eed")) {
        if (w.measure(w.size() - 3) > 0) w.replace_tail(1, "");
        return;
    }
    std::size_t cut = 0;
    if (w.ends_with("ed") && w.has_vowel(w.size() - 2)) cut = 2;
    else if (w.ends_with("ing") && w.has_vowel(w.size() - 3)) cut = 3;
    if (cut == 0) return;
    w.replace_tail(cut, "");
    if (w.ends_with("at") || w.ends_with("bl") || w.ends_with("iz")) return w.replace_tail(0, "e");
    if (w.ends_double_consonant(w.size())) {
        const char last = w.text().back();
        if (last != 'l' && last != 's' && last != 'z') w.replace_tail(1, "");
        return;
    }
    if (w.measure(w.size()) == 1 && w.ends_cvc(w.size())) w.replace_tail(0, "e");
}

// Step 1c: y -> i after a consonant that is not the first letter (NLTK's condition).
inline void porter_step1c(porter_word& w) {
    if (w.ends_with("y") && w.size() - 1 > 1 && w.consonant(w.size() - 2)) w.replace_tail(1, "i");
}

// Step 2: double suffixes to single ones, when m > 0.
inline void porter_step2(porter_word& w) {
    using enum porter_condition;
    static constexpr porter_rule rules[] = {
        {"ational", "ate", m_above_0}, {"tional", "tion", m_above_0}, {"enci", "ence", m_above_0},   {"anci", "ance", m_above_0},
        {"izer", "ize", m_above_0},    {"bli", "ble", m_above_0},     {"alli", "al", m_above_0},     {"entli", "ent", m_above_0},
        {"eli", "e", m_above_0},       {"ousli", "ous", m_above_0},   {"ization", "ize", m_above_0}, {"ation", "ate", m_above_0},
        {"ator", "ate", m_above_0},    {"alism", "al", m_above_0},    {"iveness", "ive", m_above_0}, {"fulness", "ful", m_above_0},
        {"ousness", "ous", m_above_0}, {"aliti", "al", m_above_0},    {"iviti", "ive", m_above_0},   {"biliti", "ble", m_above_0},
        {"fulli", "ful", m_above_0},   {"logi", "log", logi},
    };
    // NLTK: -alli -> -al before the list, and the list on the result (which ends in -al, so
    // this happens at most once).
    if (w.ends_with("alli") && w.measure(w.size() - 4) > 0) w.replace_tail(2, "");
    porter_apply_first(w, rules);
}

// Step 3: -icate, -ative, -alize, -iciti, -ical, -ful, -ness, when m > 0.
inline void porter_step3(porter_word& w) {
    using enum porter_condition;
    static constexpr porter_rule rules[] = {
        {"icate", "ic", m_above_0}, {"ative", "", m_above_0}, {"alize", "al", m_above_0}, {"iciti", "ic", m_above_0},
        {"ical", "ic", m_above_0},  {"ful", "", m_above_0},   {"ness", "", m_above_0},
    };
    porter_apply_first(w, rules);
}

// Step 4: the remaining suffixes, when m > 1.
inline void porter_step4(porter_word& w) {
    using enum porter_condition;
    static constexpr porter_rule rules[] = {
        {"al", "", m_above_1},   {"ance", "", m_above_1},   {"ence", "", m_above_1}, {"er", "", m_above_1},    {"ic", "", m_above_1},
        {"able", "", m_above_1}, {"ible", "", m_above_1},   {"ant", "", m_above_1},  {"ement", "", m_above_1}, {"ment", "", m_above_1},
        {"ent", "", m_above_1},  {"ion", "", m_above_1_st}, {"ou", "", m_above_1},   {"ism", "", m_above_1},   {"ate", "", m_above_1},
        {"iti", "", m_above_1},  {"ous", "", m_above_1},    {"ive", "", m_above_1},  {"ize", "", m_above_1},
    };
    porter_apply_first(w, rules);
}

// Step 5a: a final e goes when m > 1, or when m = 1 and the stem does not end *o.
// Step 5b: -ll -> -l when m > 1 (measured with one l kept).
inline void porter_step5(porter_word& w) {
    if (w.ends_with("e")) {
        const std::size_t stem = w.size() - 1;
        const int m = w.measure(stem);
        if (m > 1 || (m == 1 && !w.ends_cvc(stem))) w.replace_tail(1, "");
    }
    if (w.ends_with("ll") && w.measure(w.size() - 1) > 1) w.replace_tail(1, "");
}

// NLTK_EXTENSIONS' irregular forms: the stem listed for the word, empty when it is not one.
inline std::string_view porter_irregular(std::string_view word) {
    static constexpr std::string_view forms[][2] = {
        {"sky", "sky"},        {"skies", "sky"},       {"dying", "die"},        {"lying", "lie"},
        {"tying", "tie"},      {"news", "news"},       {"innings", "inning"},   {"inning", "inning"},
        {"outings", "outing"}, {"outing", "outing"},   {"cannings", "canning"}, {"canning", "canning"},
        {"howe", "howe"},      {"proceed", "proceed"}, {"exceed", "exceed"},    {"succeed", "succeed"},
    };
    for (const auto& f : forms)
        if (f[0] == word) return f[1];
    return {};
}

}  // namespace detail

// The stem of a lowercase word, as NLTK's PorterStemmer() (mode NLTK_EXTENSIONS) gives it.
inline std::string porter_stem(std::string_view lowercase_word) {
    if (const std::string_view irregular = detail::porter_irregular(lowercase_word); !irregular.empty()) return std::string(irregular);
    if (lowercase_word.size() <= 2) return std::string(lowercase_word);
    detail::porter_word w(lowercase_word);
    detail::porter_step1a(w);
    detail::porter_step1b(w);
    detail::porter_step1c(w);
    detail::porter_step2(w);
    detail::porter_step3(w);
    detail::porter_step4(w);
    detail::porter_step5(w);
    return w.text();
}

}  // namespace locost::eval
