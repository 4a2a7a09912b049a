//! stub
use anyhow::Result;
use super::Env;
pub fn run(env: &mut Env, args: &[String]) -> Result<i32> { Ok(env.unsupported("kubelet", args)) }
