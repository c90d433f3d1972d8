#include "runner/io/yaml_documents.h"

#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace mpb {

namespace {

// Records where each document starts; ignores every other event.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Throws at the first document that starts where the one before it started (the
// loop LoadAll would never leave). A syntax error the event parser meets first
// throws here, the same exception LoadAll would throw for it.
void refuse_stuck_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  while (parser.HandleNextDocument(starts)) {
    const auto& m = starts.marks;
    if (m.size() < 2 || m[m.size() - 1].pos != m[m.size() - 2].pos) continue;
    const YAML::Mark& at = m.back();
    const bool comma = at.pos >= 0 && static_cast<size_t>(at.pos) < text.size() && text[at.pos] == ',';
    throw YAML::ParserException(at, comma ? "unexpected ',' (a comma separates items only inside [ ] or { })"
                                          : "unexpected text: the parser cannot continue from here");
  }
}

}  // namespace

std::vector<YAML::Node> load_yaml_documents(const std::string& text) {
  refuse_stuck_documents(text);
  return YAML::LoadAll(text);
}

}  // namespace mpb
