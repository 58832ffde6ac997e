#pragma once
// Rendering of results as text (for people) and JSON (for programs). Printing happens only here.
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "resolver/host.hpp"
#include "resolver/solver.hpp"
#include "resolver/spec.hpp"

namespace gpuenv::cli {

nlohmann::ordered_json resolution_json(const resolver::Spec& spec, const resolver::Resolution& r);
void print_resolution(std::ostream& out, const resolver::Spec& spec, const resolver::Resolution& r);

nlohmann::ordered_json host_json(const resolver::HostFacts& facts, const resolver::Catalog& catalog);
void print_host(std::ostream& out, const resolver::HostFacts& facts, const resolver::Catalog& catalog);

nlohmann::ordered_json matrix_json(const std::vector<resolver::MatrixRow>& rows);
void print_matrix(std::ostream& out, const std::vector<resolver::MatrixRow>& rows);

nlohmann::ordered_json error_json(const Error& e);

}  // namespace gpuenv::cli
