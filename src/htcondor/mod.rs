//! What ckptrun learns from HTCondor: the job ad (`_CONDOR_JOB_AD`), and
//! the file transfers it will make of the sandbox.

pub mod jobad;
pub mod transfers;
