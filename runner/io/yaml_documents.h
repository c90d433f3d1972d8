// Parsing an experiment file's text into YAML documents, safely.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace mpb {

// YAML::LoadAll(text), except where yaml-cpp would never return. yaml-cpp 0.7
// (Debian 12) loops forever, allocating, on some malformed text, such as a ','
// outside a flow collection ("- a\n,"): its parser reports a new document at the
// same position without consuming input (yaml-cpp issue 1040; fixed upstream by
// pull request 1319, after 0.8.0). The documents are walked with yaml-cpp's event
// parser first, and a document that starts where the one before it started throws
// YAML::ParserException at that position, as any other syntax error does.
std::vector<YAML::Node> load_yaml_documents(const std::string& text);

}  // namespace mpb
